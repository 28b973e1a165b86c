import { isIPv6 } from 'node:net';

/**
 * Who a rate limit counts: an IPv4 address, or an IPv6 address's /64 (one subscriber is given a
 * whole /64, so counting each address would count nothing).
 */
export function rateSource(ip: string): string {
  if (!isIPv6(ip)) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const [head = '', tail = ''] = ip.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/**
 * How many times an address's (a /64's) share one IPv6 site, its /48, may take of what the HTTP
 * server bounds per address (connections, refusal log lines). A site is given a /48, 65,536 /64s:
 * counted by /64 alone, one site took all of a process's 8,192 connections from 32 of them, and had
 * every refusal logged by sending each from a new one (hostile review T18, session 37). A few hosts
 * of one site still get an address's share each.
 */
export const SITE_TIMES_ADDRESS = 4;

/** An IPv6 address's /48 (`2001:db8:5::/48`), or undefined for an IPv4 (or IPv4-mapped) one. */
export function rateSource48(ip: string): string | undefined {
  const of64 = rateSource(ip);
  if (!of64.endsWith('::/64')) return undefined;
  return `${of64.slice(0, -'::/64'.length).split(':').slice(0, 3).join(':')}::/48`;
}
