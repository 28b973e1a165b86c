import { describe, expect, it } from 'vitest';
import { cutText } from '../../src/http/web/cut-text.ts';

// A card shows the start of a long SQL or params: cut by UTF-8 bytes, never inside a character
// (half a character would show as U+FFFD, and the count would not match the bytes stored).
describe('cutText', () => {
  it('keeps text within the limit whole', () => {
    expect(cutText('héllo', 6)).toEqual({ text: 'héllo', cut: false, bytes: 6 });
  });

  it('cuts between characters and counts every byte', () => {
    const text = `ab${'✓'.repeat(10)}`; // 2 + 30 bytes
    expect(cutText(text, 6)).toEqual({ text: 'ab✓', cut: true, bytes: 32 });
    expect(cutText('😀😀', 5)).toEqual({ text: '😀', cut: true, bytes: 8 });
  });
});
