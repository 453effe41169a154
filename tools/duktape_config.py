#!/usr/bin/env python3
"""Copies Duktape's single-file distribution (Debian's duktape-dev ships it in
/usr/share/duktape) into the build directory with two options turned on:
the interrupt counter and the execution timeout check, which calls
nf_js_timeout_check() (src/engine/js.c) so a script that never ends can be
stopped.  Everything else keeps Duktape's defaults.

    duktape_config.py SRC_DIR OUT_DIR
"""
import os
import sys

CHANGES = {
    '#undef DUK_USE_INTERRUPT_COUNTER':
        '#define DUK_USE_INTERRUPT_COUNTER',
    '#undef DUK_USE_EXEC_TIMEOUT_CHECK':
        'extern int nf_js_timeout_check(void *udata);\n'
        '#define DUK_USE_EXEC_TIMEOUT_CHECK(udata) '
        'nf_js_timeout_check((udata))',
}


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, 'duk_config.h'), encoding='utf-8') as f:
        config = f.read()
    for old, new in CHANGES.items():
        if config.count(old + '\n') != 1:
            sys.exit(f'duktape_config.py: "{old}" not found exactly once '
                     f'in {src}/duk_config.h')
        config = config.replace(old + '\n', new + '\n')
    with open(os.path.join(out, 'duk_config.h'), 'w', encoding='utf-8') as f:
        f.write(config)
    for name in ('duktape.c', 'duktape.h'):
        with open(os.path.join(src, name), 'rb') as f:
            data = f.read()
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
