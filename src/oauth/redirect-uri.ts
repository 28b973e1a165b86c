/** The longest redirect URI a client may register: a real one is far shorter. */
const MAX_URI_LENGTH = 2000;

/**
 * A redirect URI a client may register (OAuth 2.1 §2.3.1, MCP authorization "Communication
 * Security"): https anywhere, http only to a loopback host (a desktop client's own listener),
 * or a private-use scheme such as `cursor://` or `vscode://`; never a fragment.
 */
export function redirectUriAllowed(uri: string): boolean {
  if (uri.length > MAX_URI_LENGTH) return false;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  if (url.hash || url.username || url.password) return false;
  if (url.protocol === 'https:') return true;
  if (url.protocol === 'http:') return ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  // Private-use schemes: a reverse domain or an app name, never one a browser runs as script.
  return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol) && !['javascript:', 'data:', 'file:', 'blob:', 'about:', 'vbscript:'].includes(url.protocol);
}
