#!/usr/bin/env python3
"""Checks the layering of src/: includes may only point down the layer order,
only store/ may include libpq (directly or through store/sql.h), and every
header compiles on its own (with the compiler given as argv[1], if any).

    http -> platform, engine -> store -> runtime -> util
    server and cli sit on top: server may include anything, cli only util
    and (later) client.

Prints one line per violation and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..'))
SRC = os.path.join(ROOT, 'src')

# layer -> the layers it may include (itself included)
ALLOWED = {
    'util': {'util'},
    'runtime': {'runtime', 'util'},
    'store': {'store', 'runtime', 'util'},
    'engine': {'engine', 'store', 'runtime', 'util'},
    'platform': {'platform', 'store', 'runtime', 'util'},
    'http': {'http', 'platform', 'engine', 'store', 'runtime', 'util'},
    'client': {'client', 'util'},
    'cli': {'cli', 'client', 'util'},
    'server': {'server', 'cli', 'http', 'platform', 'engine', 'store',
               'runtime', 'util'},
}
LIBPQ_OK = {'store'}
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')


def main():
    problems = []
    headers = []
    for layer in sorted(os.listdir(SRC)):
        folder = os.path.join(SRC, layer)
        if not os.path.isdir(folder):
            continue
        if layer not in ALLOWED:
            problems.append(f'src/{layer}: not a known layer (add it to '
                            f'tools/check_layers.py)')
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, ROOT)
            if name.endswith('.h'):
                headers.append(rel)
            with open(path, encoding='utf-8') as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    kind, target = m.groups()
                    if target in ('libpq-fe.h', 'store/sql.h') and \
                            layer not in LIBPQ_OK:
                        problems.append(f'{rel}:{lineno}: only store/ may '
                                        f'include {target}')
                    if kind == '"':
                        dep = target.split('/')[0]
                        if '/' in target and dep not in ALLOWED[layer]:
                            problems.append(f'{rel}:{lineno}: {layer} may '
                                            f'not include {target}')
    cc = sys.argv[1] if len(sys.argv) > 1 else None
    if cc:
        flags = sys.argv[2:]
        with tempfile.TemporaryDirectory() as tmp:
            for h in headers:
                src = os.path.join(tmp, 'h.c')
                with open(src, 'w') as f:
                    f.write(f'#include "{os.path.relpath(h, "src")}"\n')
                r = subprocess.run(
                    [cc, '-std=c17', '-D_GNU_SOURCE', '-Wall', '-Wextra',
                     '-Werror', '-fsyntax-only', '-I', SRC] + flags + [src],
                    capture_output=True, text=True)
                if r.returncode != 0:
                    first = (r.stderr.strip().splitlines() or ['?'])[0]
                    problems.append(f'{h}: does not compile on its own: '
                                    f'{first}')
    for p in problems:
        print('layers:', p)
    print(f'layers: {len(headers)} headers, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
