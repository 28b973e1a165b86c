import { afterEach, expect, it, vi } from 'vitest';

// The inbox page's script (src/http/web/browser/app.ts) in a stand-in browser: only what its
// live inbox touches. A run that ends between the page's render and its stream's start sends
// its event to nobody (session 38, N16: the "ran" cell of an approved call stayed empty after
// the redirect that follows a decision), so the page fetches itself once the stream is ready.

type Listener = (e: Event) => void;

class FakeEventSource {
  static readonly CLOSED = 2;
  static last: FakeEventSource | undefined;
  readonly listeners = new Map<string, Listener[]>();
  readyState = 1;
  onerror: (() => void) | null = null;
  constructor(readonly url: string) {
    FakeEventSource.last = this;
  }
  addEventListener(type: string, fn: Listener): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]);
  }
  emit(type: string, data = '{}'): void {
    for (const fn of this.listeners.get(type) ?? []) fn({ data } as unknown as Event);
  }
  close(): void {
    this.readyState = FakeEventSource.CLOSED;
  }
}

afterEach(() => {
  vi.unstubAllGlobals();
});

it('fetches the page once its live stream is ready, so a run that ended before it is shown', async () => {
  let loaded: (() => void) | undefined;
  const pending = { dataset: { page: '1' }, addEventListener: () => {} };
  vi.stubGlobal('document', {
    addEventListener: (type: string, fn: () => void) => {
      if (type === 'DOMContentLoaded') loaded = fn;
    },
    getElementById: (id: string) => (id === 'pending' ? pending : null),
    querySelectorAll: () => [],
  });
  vi.stubGlobal('location', { pathname: '/inbox', search: '?decided=approved', assign: () => {} });
  vi.stubGlobal('EventSource', FakeEventSource);
  for (const name of ['HTMLFormElement', 'HTMLButtonElement']) vi.stubGlobal(name, class {});
  // A fetch that never answers: the test asks only whether the page was asked for.
  const fetched: string[] = [];
  vi.stubGlobal('fetch', (url: string) => {
    fetched.push(url);
    return new Promise(() => {});
  });

  await import('../../src/http/web/browser/app.ts');
  loaded?.();
  const source = FakeEventSource.last;
  expect(source?.url).toBe('/inbox/events');
  expect(fetched).toEqual([]);
  source!.emit('ready');
  expect(fetched).toEqual(['/inbox?decided=approved']);
});
