/**
 * `fetch` giving each request its own AbortSignal, which follows the one the caller passed
 * until the answer's headers are in.
 *
 * Why: the SDK's StreamableHTTPClientTransport (1.32) passes one long-lived signal to every
 * fetch of a session, and Node's fetch (undici) adds an abort listener to it per request that
 * only a garbage collection removes. Over a few thousand calls the signal held 1,500+ listeners
 * ("MaxListenersExceededWarning ... abort listeners added to [AbortSignal]") and each fetch paid
 * to count them. With this, the long-lived signal holds one listener per request in flight.
 *
 * An abort after the headers no longer reaches the request: fine for the JSON answers of a
 * stateless server, not for a server-sent event stream, whose body is read long after.
 */
export function ownSignalFetch(url: string | URL, init?: RequestInit): Promise<Response> {
  const outer = init?.signal;
  if (!outer) return fetch(url, init);
  const own = new AbortController();
  const follow = () => own.abort(outer.reason);
  if (outer.aborted) follow();
  else outer.addEventListener('abort', follow, { once: true });
  return fetch(url, { ...init, signal: own.signal }).finally(() => outer.removeEventListener('abort', follow));
}
