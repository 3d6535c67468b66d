/**
 * A request a server has taken but cannot finish: its headers ask `Expect: 100-continue`, and it
 * resolves once the server said "continue" — a Node.js server says it just before it hands the
 * request to its handler, so by then the handler holds whatever it takes first (a slot, in
 * api/slots.ts). Only half the announced body is sent, so the request stays open until `release`
 * sends the rest or `abort` drops it.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface HeldRequest {
  /** Sends the rest of the body; resolves with the response's status. */
  release(): Promise<number>;
  abort(): void;
}

export function holdRequest(url: string, body: string, ca?: Buffer): Promise<HeldRequest> {
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  const options = {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'content-length': String(bytes.length),
      expect: '100-continue',
    },
    ...(ca ? { ca } : {}),
  };
  let req: ClientRequest;
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, options, resolve);
    req.on('error', reject);
  });
  response.catch(() => undefined); // an aborted request's error is expected
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.once('continue', () => {
      req.write(bytes.subarray(0, half));
      resolve({
        release: async () => {
          req.end(bytes.subarray(half));
          const res = await response;
          res.resume();
          return res.statusCode ?? 0;
        },
        abort: () => {
          req.destroy();
        },
      });
    });
    req.flushHeaders();
  });
}
