/** A stream chunk is at most 1 MB (spec, Limits); larger output is split. */
export const MAX_CHUNK_BYTES = 1_000_000;
/** Characters per piece when splitting text: even at 6 bytes a character (\u escapes) it fits. */
const SPLIT_CHARS = Math.floor(MAX_CHUNK_BYTES / 6) - 2;

/**
 * Splits one streamed value into JSON chunks of at most 1 MB. Text (a string value, or the JSON
 * of a larger value) is cut into string pieces; surrogate pairs are never cut.
 *
 * @example splitChunk({ token: 'hi' }) // ['{"token":"hi"}']
 */
export function splitChunk(value: unknown): string[] {
  const json = JSON.stringify(value ?? null);
  if (json.length <= SPLIT_CHARS || Buffer.byteLength(json) <= MAX_CHUNK_BYTES) return [json];
  const text = typeof value === 'string' ? value : json;
  const pieces: string[] = [];
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + SPLIT_CHARS);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    pieces.push(JSON.stringify(text.slice(at, end)));
    at = end;
  }
  return pieces;
}

/**
 * A reader gets a job's buffered chunks a page at a time (JSON /stream answer, a turn of an SSE
 * or OpenAI stream): at most this many chunks, and none after STREAM_PAGE_BYTES (the first
 * always comes, so a page is at most STREAM_PAGE_BYTES + MAX_CHUNK_BYTES). A backlog of any size
 * is served in bounded memory and strings far below V8's limit.
 */
export const STREAM_PAGE_CHUNKS = 5_000;
/** See STREAM_PAGE_CHUNKS: about 4 MB of chunk text per page. */
export const STREAM_PAGE_BYTES = 4_000_000;
