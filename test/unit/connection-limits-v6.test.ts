import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { expect, it } from 'vitest';
import { limitConnections } from '../../src/http/connection-limits.ts';

// Session 36, T16: the per-address bound counted each IPv6 address alone, but a host is given a
// whole /64 (2^64 addresses): one host took every one of HTTP_MAX_CONNECTIONS (8,192), as many as it
// liked, 256 from each of 32 addresses, and every other client was turned away at the door. It
// counts an IPv6 address's /64 now, as the OAuth rates do (`rateSource`).

/** A connection as the server hears of it: its address, and whether the server closed it. */
function connection(remoteAddress: string): Socket & { closedByServer: boolean } {
  const s = Object.assign(new EventEmitter(), { remoteAddress, closedByServer: false });
  return Object.assign(s, { destroy: () => ((s.closedByServer = true), s) }) as unknown as Socket & { closedByServer: boolean };
}

it('counts the connections of one IPv6 /64 together against the per-address bound', () => {
  const server = createServer();
  limitConnections(server, { perAddress: 2, total: 100, requestTimeoutMs: 30_000, checkEveryMs: 5_000 }, false);
  const same64 = ['2001:db8:1:2::a', '2001:db8:1:2:ffff::b', '2001:db8:1:2::c'].map(connection);
  const other64 = connection('2001:db8:1:3::a');
  for (const s of [...same64, other64]) server.emit('connection', s);
  // main: none closed (each address counted alone).
  expect(same64.map((s) => s.closedByServer)).toEqual([false, false, true]);
  expect(other64.closedByServer).toBe(false);
  // One of the /64's closing makes room for the next.
  same64[0]!.emit('close');
  const next = connection('2001:db8:1:2::d');
  server.emit('connection', next);
  expect(next.closedByServer).toBe(false);
});

// Session 37, T18: a site is given a /48 (65,536 /64s), so counted by /64 alone one site still held
// all 8,192 connections from 32 of its /64s. A /48 holds at most 4 times the per-address bound.
it('counts the connections of one IPv6 /48 together, at 4 times the per-address bound', () => {
  const server = createServer();
  limitConnections(server, { perAddress: 2, total: 100, requestTimeoutMs: 30_000, checkEveryMs: 5_000 }, false);
  // Twelve /64s of one /48, one connection each: the first 8 fit the /48's bound of 8.
  const site = Array.from({ length: 12 }, (_, i) => connection(`2001:db8:7:${(i + 1).toString(16)}::1`));
  const otherSite = connection('2001:db8:8:1::1');
  const v4 = connection('192.0.2.1');
  for (const s of [...site, otherSite, v4]) server.emit('connection', s);
  // main: none closed.
  expect(site.map((s) => s.closedByServer)).toEqual([...Array(8).fill(false), ...Array(4).fill(true)]);
  expect([otherSite.closedByServer, v4.closedByServer]).toEqual([false, false]);
  // One of the site's connections closing makes room for one more of its /64s.
  site[0]!.emit('close');
  const next = connection('2001:db8:7:ff::1');
  server.emit('connection', next);
  expect(next.closedByServer).toBe(false);
  const past = connection('2001:db8:7:fe::1');
  server.emit('connection', past);
  expect(past.closedByServer).toBe(true);
});

// Session 38, T20: sites at their bound could hold the total between them (8 /48s took all 8,192),
// and every other client was closed at the door. A site with fewer now takes the place of the
// oldest connection of the site holding the most (test/integration/connection-fair-share.test.ts).
it('gives a new IPv6 site a place held by sites at their bound when the total is held', () => {
  const server = createServer();
  limitConnections(server, { perAddress: 2, total: 16, requestTimeoutMs: 30_000, checkEveryMs: 5_000 }, false);
  const sites = [7, 8].map((s) => Array.from({ length: 8 }, (_, i) => connection(`2001:db8:${s}:${(i + 1).toString(16)}::1`)));
  for (const s of sites.flat()) server.emit('connection', s);
  expect(sites.flat().some((s) => s.closedByServer)).toBe(false);
  const newcomer = connection('2001:db8:9:1::1');
  server.emit('connection', newcomer);
  expect(newcomer.closedByServer).toBe(false);
  expect(sites[0]!.map((s) => s.closedByServer)).toEqual([true, ...Array(7).fill(false)]);
  // The site that gave its place cannot take it back from the other (8 against its 7).
  const back = connection('2001:db8:7:ff::1');
  server.emit('connection', back);
  expect(back.closedByServer).toBe(true);
});
