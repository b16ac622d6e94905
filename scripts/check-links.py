#!/usr/bin/env python3
"""Checks the relative links of Markdown files: every link and image must point to a file or
folder that exists, and a `#fragment` to a heading of the Markdown file it names (anchors as
GitHub and mdBook make them: lowercase, punctuation dropped, spaces to '-', a repeated heading
numbered -1, -2, ...). Web and mail links are skipped: there is no network here.

    scripts/check-links.py README.md docs            # files, or folders searched for *.md

Prints each broken link as FILE:LINE -> TARGET and exits 1 when there is one."""
import re
import sys
from pathlib import Path
from urllib.parse import unquote

# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
# [label]: target, a reference definition.
DEFINITION = re.compile(r'^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
CUSTOM_ID = re.compile(r'\{#([\w\-]+)[^}]*\}\s*$')
HTML_ID = re.compile(r'<a\s+(?:id|name)="([^"]+)"')
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.\-]*:')


def prose_lines(path):
    """(line number, text) of each line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1) == fence:
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line


def anchor(heading):
    """The id GitHub and mdBook give a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link's text only
    text = re.sub(r'<[^>]+>', '', text).strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


_anchors = {}


def anchors_of(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            found.update(HTML_ID.findall(line))
            heading = HEADING.match(line)
            if not heading:
                continue
            text = heading.group(2)
            custom = CUSTOM_ID.search(text)
            if custom:
                found.add(custom.group(1))
                continue
            base = anchor(text)
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f'{base}-{count}')
        _anchors[path] = found
    return _anchors[path]


def targets(line):
    line = re.sub(r'(`+).*?\1', '', line)  # inline code holds no links
    yield from INLINE.findall(line)
    definition = DEFINITION.match(line)
    if definition:
        yield definition.group(1)


def broken_links(path):
    for number, line in prose_lines(path):
        for target in targets(line):
            if SCHEME.match(target):
                continue  # http(s), mailto: not checked offline
            file_part, _, fragment = unquote(target).partition('#')
            linked = (path.parent / file_part) if file_part else path
            if not linked.exists():
                yield number, target
            elif fragment and linked.suffix == '.md' and fragment not in anchors_of(linked):
                yield number, target


def main(arguments):
    if not arguments:
        print(__doc__, file=sys.stderr)
        return 2
    files = []
    for argument in map(Path, arguments):
        if argument.is_dir():
            files.extend(sorted(argument.rglob('*.md')))
        elif argument.is_file():
            files.append(argument)
        else:
            print(f'check-links: no such file or folder: {argument}', file=sys.stderr)
            return 2
    broken = [(f, n, t) for f in files for n, t in broken_links(f)]
    for f, n, t in broken:
        print(f'{f}:{n} -> {t}')
    print(f'check-links: {len(files)} files, {len(broken)} broken links')
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
