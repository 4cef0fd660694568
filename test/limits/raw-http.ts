// Raw HTTP/1.1 over a socket, for tests that must control how a request is sent (slow bodies,
// idle connections): what fetch cannot do.
import { connect, type Socket } from 'node:net';

/** A connection whose request is written by hand; everything the server sends is kept in `received`. */
export class RawConnection {
  received = '';
  closed = false;
  /** Socket errors (a reset while sending: the server closed without reading the body). */
  readonly errors: string[] = [];
  readonly socket: Socket;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = connect(Number(port), hostname);
    this.socket.setEncoding('latin1');
    this.socket.on('data', (d: string) => (this.received += d));
    this.socket.on('close', () => (this.closed = true));
    this.socket.on('error', (err: NodeJS.ErrnoException) => this.errors.push(err.code ?? err.message));
  }

  /** Resolves once connected. */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.socket.connecting) return resolve();
      this.socket.once('connect', () => resolve());
      this.socket.once('error', reject);
    });
  }

  /** Writes a POST's head declaring `length` body bytes, and `first` body bytes of it. */
  startPost(path: string, key: string, length: number, first = '{'): void {
    this.socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${first}`);
  }

  /** The status code of the first response, when one came. */
  status(): number | undefined {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.received);
    return m ? Number(m[1]) : undefined;
  }

  close(): void {
    this.socket.destroy();
  }
}
