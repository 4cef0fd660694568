import type { IncomingMessage } from 'node:http';

/**
 * Links to the gateway's own files (`/files/<key>?expires=&sig=`, the local object store of the
 * image endpoints) as the client reached the gateway. Without GANTRY_PUBLIC_URL a worker only
 * knows the gateway by the address it was given (`http://127.0.0.1:PORT`), which is wrong for a
 * client that came through `localhost`, the machine's name or another gateway of the same
 * database: such links in an answer are rewritten to the origin of the request (its `Host`).
 * Only links whose signature verifies are touched (the signing key is shared by every gateway of
 * a deployment), so a job's own text that merely looks like a link stays as it was. With
 * GANTRY_PUBLIC_URL set, links already name the public address and nothing is rewritten.
 */
export interface FileLinks {
  /** `text` (a job's JSON) with the gateway's own file links pointing at the origin `req` came to. */
  localize(text: string, req: IncomingMessage): string;
}

/** A signed file link as the local object store writes it: origin, key, expiry, signature. */
const FILE_LINK = /https?:\/\/[A-Za-z0-9.:[\]-]{1,300}\/files\/([A-Za-z0-9._/-]{1,512})\?expires=(\d{1,12})&sig=([A-Za-z0-9_-]{1,128})/g;

/** A Host header worth echoing back: a name or address and an optional port, nothing else. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

/**
 * @example
 * const links = createFileLinks({ publicUrl: null, verify: (key, expires, sig) => verifyFileSignature(k, key, expires, sig, Date.now()) });
 * links.localize('{"image_url":"http://127.0.0.1:8080/files/a.png?expires=…&sig=…"}', req); // …"http://localhost:8080/files/a.png?…"
 */
export function createFileLinks(options: { publicUrl: string | null; verify(key: string, expires: string, sig: string): boolean }): FileLinks {
  if (options.publicUrl !== null) return { localize: (text) => text };
  return {
    localize(text, req) {
      if (!text.includes('/files/')) return text;
      const origin = requestOrigin(req);
      if (origin === null) return text;
      return text.replace(FILE_LINK, (link, key: string, expires: string, sig: string) => (options.verify(key, expires, sig) ? `${origin}/files/${key}?expires=${expires}&sig=${sig}` : link));
    },
  };
}

/** `http://<Host>` of a request (https when the connection is TLS), or null without a usable Host. */
export function requestOrigin(req: IncomingMessage): string | null {
  const host = req.headers.host;
  if (host === undefined || host.length > 300 || !HOST.test(host)) return null;
  const tls = (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${tls ? 'https' : 'http'}://${host}`;
}
