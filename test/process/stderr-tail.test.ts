import { describe, expect, it } from 'vitest';
import { StderrTail } from '../../src/process/stderr-tail.ts';

describe('StderrTail', () => {
  it('keeps everything while under the bound', () => {
    const tail = new StderrTail(100);
    tail.push('hello ');
    tail.push(Buffer.from('world'));
    expect(tail.text()).toBe('hello world');
  });

  it('keeps only the last maxBytes bytes however much is pushed', () => {
    const tail = new StderrTail(10);
    for (let i = 0; i < 1000; i += 1) tail.push(`chunk ${i}\n`);
    tail.push(Buffer.alloc(1 << 20, 'x'));
    tail.push('0123456789END');
    expect(tail.byteLength).toBe(10);
    expect(tail.text()).toBe('3456789END');
  });

  it('does not start with half a character', () => {
    const cut = new StderrTail(3);
    cut.push('ab€x'); // € is 3 bytes: the last 3 bytes are the end of € and 'x'
    expect(cut.text()).toBe('x');
    const whole = new StderrTail(4);
    whole.push('ab€x');
    expect(whole.text()).toBe('€x');
  });

  it('keeps nothing when the bound is 0', () => {
    const tail = new StderrTail(0);
    tail.push('anything');
    expect(tail.text()).toBe('');
  });
});
