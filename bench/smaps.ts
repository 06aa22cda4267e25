// Where a process's resident memory is, from /proc/<pid>/smaps (Linux): the Rss of every mapping, summed into
//   binary     pages of the process's own executable file (for Node: its code, V8's compilers, OpenSSL, ICU
//              data) that are still the file's: clean, shared with every process of the same binary, and
//              reclaimable, since the kernel can read them back from the file
//   anonymous  pages of no file: the heap, the stacks, every mmap of anonymous memory (V8's heap, malloc),
//              and the copied-on-write pages of private file mappings (a binary's written .data, say)
//   other      the rest: other files' pages (shared libraries) and shared memory
// The three add up to the process's RSS as smaps reports it: the pages VmRSS of /proc/<pid>/status counts.
import { readFileSync, readlinkSync } from 'node:fs';

export interface RssSplit {
  /** Every mapping's Rss. */
  rssKb: number;
  /** File-backed Rss of the mappings of `binaryPath`. */
  binaryKb: number;
  /** `Anonymous:` of every mapping. */
  anonymousKb: number;
  /** rssKb − binaryKb − anonymousKb. */
  otherKb: number;
}

/** A mapping's header: `start-end perms offset dev inode [pathname]`; the pathname may hold spaces. */
const HEADER = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+ *(.*)$/;
const FIELD = /^(\w+):\s+(\d+) kB$/;

/**
 * Splits the Rss of an smaps text (one process's /proc/<pid>/smaps) among the pages of `binaryPath` (as the
 * kernel names the mapping: what /proc/<pid>/exe reads), anonymous pages and the rest.
 */
export function splitRss(smaps: string, binaryPath: string): RssSplit {
  let rssKb = 0;
  let binaryKb = 0;
  let anonymousKb = 0;
  let inBinary = false;
  let mappings = 0;
  for (const line of smaps.split('\n')) {
    const header = HEADER.exec(line);
    if (header) {
      inBinary = header[1] === binaryPath;
      mappings++;
      continue;
    }
    const field = FIELD.exec(line);
    if (!field) continue;
    if (mappings === 0) throw new Error(`smaps: a field before any mapping: "${line}"`);
    const kb = Number(field[2]);
    if (field[1] === 'Rss') {
      rssKb += kb;
      if (inBinary) binaryKb += kb;
    } else if (field[1] === 'Anonymous') {
      anonymousKb += kb;
      // A private mapping of the binary that was written to holds copies of its pages: not the file's any more.
      if (inBinary) binaryKb -= kb;
    }
  }
  if (mappings === 0) throw new Error('smaps: no mapping found');
  return { rssKb, binaryKb, anonymousKb, otherKb: rssKb - binaryKb - anonymousKb };
}

/** The split of a running process (`self` for this one): its smaps against its own executable. */
export function readRssSplit(pid: number | 'self'): RssSplit {
  // The link reads as the kernel names the binary's mappings, " (deleted)" included if it was replaced on disk.
  const binary = readlinkSync(`/proc/${pid}/exe`);
  return splitRss(readFileSync(`/proc/${pid}/smaps`, 'utf8'), binary);
}
