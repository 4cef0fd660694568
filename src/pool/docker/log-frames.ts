import { StringDecoder } from 'node:string_decoder';

/** Docker cuts log lines at 16 KiB; a frame announcing more than this means a broken stream, which is dropped rather than buffered. */
const MAX_FRAME = 8 * 1024 * 1024;

/**
 * The engine's log stream of a container without a TTY is multiplexed: frames of an 8-byte
 * header (byte 0: 1 stdout, 2 stderr; bytes 4–7: payload length, big-endian) and the
 * payload. Frames arrive cut anywhere, and a UTF-8 character can straddle two frames, so the
 * reader keeps the unfinished header or payload and one decoder per stream.
 *
 * @example
 * const read = createLogFrameReader((stream, text) => log.write(stream, text));
 * res.on('data', read);
 */
export function createLogFrameReader(output: (stream: 'stdout' | 'stderr', text: string) => void): (chunk: Buffer) => void {
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  let pending: Buffer = Buffer.alloc(0);
  let broken = false;
  return (chunk) => {
    if (broken) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (size > MAX_FRAME) {
        broken = true;
        pending = Buffer.alloc(0);
        output('stderr', `\n[gantry: the engine's log stream broke (a frame of ${size} bytes); later output is not shown]\n`);
        return;
      }
      if (pending.length < 8 + size) break;
      const stream = pending[0] === 2 ? 'stderr' : 'stdout';
      const text = decoders[stream].write(pending.subarray(8, 8 + size));
      if (text !== '') output(stream, text);
      pending = pending.subarray(8 + size);
    }
  };
}
