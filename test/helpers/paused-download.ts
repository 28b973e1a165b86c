import http from 'node:http';

// A client that reads nothing: the server's answer stays under way (a slot held, a stream open)
// until the test reads it or drops it. The CSV export and offloaded-result download tests hold
// their slots this way, and read the answer afterwards to see whether the server cut it off.

/**
 * GETs `url` and leaves the answer's body unread (paused); the answer is pushed to `held`, for
 * the test's afterAll to destroy.
 */
export function pausedGet(url: string, headers: http.OutgoingHttpHeaders, held: http.IncomingMessage[]): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      res.pause();
      held.push(res);
      resolve(res);
    });
    req.on('error', reject);
  });
}

/** Reads a paused answer to its end: whether it ended complete (false: cut off by the server). */
export function readToEnd(res: http.IncomingMessage): Promise<boolean> {
  return new Promise((resolve) => {
    res.resume();
    res.once('close', () => resolve(res.complete));
  });
}
