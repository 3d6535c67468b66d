/**
 * Every relative link in the README and docs/ leads somewhere: the file exists and, when the
 * link names a heading (`page.md#anchor`), the page has that heading (GitHub's anchor rules).
 * Moving a section between pages breaks links silently otherwise.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import GithubSlugger from 'github-slugger';
import { describe, expect, it } from 'vitest';

const repo = resolve(import.meta.dirname, '../..');
const pages = [
  join(repo, 'README.md'),
  ...readdirSync(join(repo, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(repo, 'docs', f)),
];

/** Markdown without its fenced code blocks (a link-like text in a code sample is not a link). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

function anchorsOf(page: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  for (const m of prose(readFileSync(page, 'utf8')).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    anchors.add(slugger.slug(m[1]!.replace(/`/g, '')));
  }
  return anchors;
}

function linksOf(page: string): string[] {
  const text = prose(readFileSync(page, 'utf8')).replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z]+:/.test(target));
}

describe('links in the README and docs/', () => {
  for (const page of pages) {
    it(`${relative(repo, page)}: every relative link resolves`, () => {
      const broken: string[] = [];
      for (const link of linksOf(page)) {
        const [file, anchor] = link.split('#') as [string, string | undefined];
        const target = file === '' ? page : resolve(dirname(page), decodeURI(file));
        if (!existsSync(target)) {
          broken.push(`${link}: no such file`);
          continue;
        }
        if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(target).has(anchor)) {
          broken.push(`${link}: no heading with anchor #${anchor} in ${relative(repo, target)}`);
        }
      }
      expect(broken).toEqual([]);
    });
  }
});
