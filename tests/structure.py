#!/usr/bin/env python3
"""The tree's structure check (make structure, part of make test; no KVM).

Fails on:
  - an #include that crosses the layer rule (LAYERS below, the table
    docs/ARCHITECTURE.md shows), or one that is not rooted (every include
    names its folder from the repository root: "vmm/base/log.h");
  - an include of a cli subsystem's private header from outside it (each
    cli/SUBSYSTEM/ has one public header, PUBLIC below);
  - an include of guest-init/ from outside it (the shared wire code is
    vmm/wire/);
  - a function over MAX_FUNC lines (opening to closing brace of each
    function definition in a .c file);
  - a .c or .h file that does not open with a comment saying what it is;
  - a .c file directly in cli/ that is not a verb (defines no
    `const struct cli_verb cli_verb_...`) nor one of the binaries' entry
    files (ENTRY);
  - a file in a cli subsystem folder (cli/*/) that writes to stderr or
    stdout itself (fprintf(stderr, ...), printf, puts, perror, fputs(...,
    stderr), write(STDERR_FILENO, ...), ...): subsystems return 0/-errno
    and a message (cli_seterr), the verb prints it. The exceptions, where
    what is written is the product or no caller is left to hand an error
    to, are counted one by one in STDIO_ALLOW.
It also prints the folder circles the includes make (there should be none).

  tests/structure.py            check the tree (run from its root)
  tests/structure.py --self-test feed it bad files and check it fails
"""
import os
import re
import subprocess
import sys
import tempfile

MAX_FUNC = 200

# Layer -> the folders its files may include (besides their own). A
# folder not named here is not a layer (tests/, bench/: they may include
# what they test).
WIRE = ['vmm/wire']
BASE = WIRE + ['vmm/base']
LOW = BASE + ['boot', 'devices', 'devices/fuse']
CORE = LOW + ['vmm']
VMM_ALL = CORE + ['vmm/api']
LAYERS = {
    'vmm/wire': [],
    'vmm/base': WIRE,
    'boot': BASE,
    'devices/fuse': BASE,
    'devices': BASE + ['devices/fuse'],
    'vmm': LOW,
    'vmm/api': CORE,
    'guest-init': WIRE,
    'cli/util': VMM_ALL,
    'cli/sandbox': VMM_ALL + ['cli/util'],
    'cli/egress': VMM_ALL + ['cli/util', 'cli/sandbox'],
    'cli/images': VMM_ALL + ['cli/util', 'cli/sandbox'],
    'cli/mcp': VMM_ALL + ['cli/util', 'cli/sandbox', 'cli/drive'],
    'cli/oci': VMM_ALL + ['cli/util', 'cli/sandbox'],
    'cli/drive': VMM_ALL + ['cli/util', 'cli/sandbox'],
    'cli/launch': VMM_ALL + ['cli/util', 'cli/sandbox', 'cli/egress', 'cli/images', 'cli/drive'],
    'cli/dockerfile': VMM_ALL + ['cli/util', 'cli/sandbox', 'cli/images', 'cli/launch'],
    'cli/e2b': VMM_ALL + ['cli/util', 'cli/sandbox', 'cli/mcp', 'cli/drive'],
    'cli': VMM_ALL + ['cli/util', 'cli/sandbox', 'cli/egress', 'cli/images', 'cli/mcp', 'cli/oci',
                      'cli/launch', 'cli/dockerfile', 'cli/drive', 'cli/e2b'],
}
# The one header of each cli subsystem that files outside it may include.
PUBLIC = {
    'cli/util': 'cli/util/util.h',
    'cli/sandbox': 'cli/sandbox/sandbox.h',
    'cli/egress': 'cli/egress/egress.h',
    'cli/images': 'cli/images/images.h',
    'cli/dockerfile': 'cli/dockerfile/dockerfile.h',
    'cli/mcp': 'cli/mcp/mcp.h',
    'cli/oci': 'cli/oci/oci.h',
    'cli/launch': 'cli/launch/launch.h',
    'cli/drive': 'cli/drive/drive.h',
    'cli/e2b': 'cli/e2b/e2b.h',
}
# cli/*.c files that are no verb but a binary's entry: the verb table
# (main.c) and vmm-tls's side of the two binaries (tls.c).
ENTRY = {'cli/main.c', 'cli/tls.c'}
# Writing to stderr/stdout directly (comments and string literals are
# blanked before matching, so a message that quotes a call is no hit).
STDIO = re.compile(r'''(?x)
   \b(?:fprintf|vfprintf|fputs|fputc|putc|fwrite)\s*\((?:[^;]*?,)?\s*(?:stderr|stdout)\s*[,)]
 | \b(?:printf|vprintf|puts|putchar|perror|psignal|psiginfo)\s*\(
 | \b(?:err|errx|verr|verrx|warn|warnx|vwarn|vwarnx|error|error_at_line)\s*\(
 | \b(?:dprintf|write|write_full)\s*\(\s*(?:STDERR_FILENO|STDOUT_FILENO|1|2)\s*,
''')
# The files of cli/*/ that may write to stderr/stdout, each with how many
# lines do and why. The count is exact: one more, or one fewer, fails (a
# stale entry is removed, a new write goes through the verb).
STDIO_ALLOW = {
    # The forked helper of `vmm run -- CMD` runs the command (api_exec) and
    # exits with its status: no caller is left to hand api_exec's note to
    # ("the command crashed in the guest: SIGSEGV ..."), and its stderr is
    # the user's, where vmm exec prints the same line.
    'cli/launch/run_helper.c': (1, 'the end of vmm run -- CMD'),
    # A forked child that could not exec its tool says why on its own stderr
    # (the build log, or the pipe its parent reads) and exits 127, as a
    # shell does: it has no caller, only an exit status.
    'cli/images/image_build.c': (1, 'a child that could not exec'),
    'cli/oci/oci_hooks.c': (1, 'a hook that could not exec: its stderr is the pipe oci_hooks reads'),
    'cli/oci/oci_net.c': (1, 'ip(8) not found: its stderr is the pipe the parent reads'),
    'cli/oci/oci_vm.c': (1, 'the VMM child that could not join the netns: the pipe vmm_cmd_ns reads'),
}
# Headers generated into the build tree (-I$(BUILD)/gen).
GENERATED = {'syscall_names.h'}
SOURCE_DIRS = ('vmm/', 'devices/', 'boot/', 'guest-init/', 'cli/', 'tests/', 'bench/')

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    d = os.path.dirname(path)
    return d if d in LAYERS else None


def check_includes(path, text, exists):
    errs = []
    src = layer_of(path)
    for inc in INCLUDE.findall(text):
        if inc in GENERATED:
            continue
        if not exists(inc):
            errs.append(f'{path}: #include "{inc}" is not rooted (name it from the repository root)')
            continue
        dst = os.path.dirname(inc)
        if dst.startswith('guest-init') and not path.startswith(('guest-init/', 'tests/')):
            errs.append(f'{path}: includes "{inc}": guest-init/ is the guest\'s own (shared code lives in vmm/wire/)')
        for sub, pub in PUBLIC.items():
            if dst == sub and not path.startswith(sub + '/') and not path.startswith('tests/') and inc != pub:
                errs.append(f'{path}: includes "{inc}", a private header of {sub}/ (use {pub})')
        if src is None or dst == src:
            continue
        if dst in LAYERS and dst not in LAYERS[src]:
            errs.append(f'{path}: includes "{inc}": {src}/ may not include {dst}/ (layer rule, docs/ARCHITECTURE.md)')
    return errs


def long_functions(path, text):
    """(name, lines) of each function definition longer than MAX_FUNC: a
    body opens with '{' alone in column 0 after a line ending in ')' and
    closes with '}' in column 0."""
    out = []
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        if lines[i] == '{':
            j = i - 1
            while j >= 0 and lines[j].strip() == '':
                j -= 1
            if j >= 0 and lines[j].rstrip().endswith(')'):
                # the signature's first line: the one holding '(' at depth 0
                k = j
                while k > 0 and '(' not in lines[k]:
                    k -= 1
                m = re.search(r'(\w+)\s*\(', lines[k])
                name = m.group(1) if m else '?'
                end = i + 1
                while end < len(lines) and lines[end] != '}':
                    end += 1
                n = end - i + 1
                if n > MAX_FUNC:
                    out.append((name, n, i + 1))
                i = end
        i += 1
    return out


def opens_with_comment(text):
    for ln in text.split('\n'):
        s = ln.strip()
        if s:
            return s.startswith('/*') or s.startswith('//')
    return False


def blank_literals(text):
    """text with comments and string and character literals blanked
    (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i) or text.startswith('//', i):
            j = text.find('*/', i + 2) + 2 if c == '/' and text[i + 1] == '*' else text.find('\n', i)
            j = n if j < 2 or j > n else j
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def stdio_lines(text):
    """The lines where a write to stderr/stdout starts (a call may span lines)."""
    t = blank_literals(text)
    return sorted({t.count('\n', 0, m.start()) + 1 for m in STDIO.finditer(t)})


def check_stdio(path, text, allow=None):
    """A cli subsystem's file writing to stderr/stdout itself."""
    if not re.fullmatch(r'cli/[^/]+/.+\.[ch]', path):
        return []
    if allow is None:
        allow = STDIO_ALLOW
    lines = stdio_lines(text)
    want = allow.get(path, (0, ''))[0]
    if len(lines) > want:
        where = ', '.join(str(n) for n in lines)
        return [f'{path}:{lines[0]}: writes to stderr/stdout itself on line(s) {where} ({want} allowed): '
                'return -errno and a message (cli_seterr) for the verb to print, or take a FILE * from it']
    if len(lines) < want:
        return [f'{path}: STDIO_ALLOW counts {want} lines writing to stderr/stdout, '
                f'it has {len(lines)}: lower the count']
    return []


def is_verb_file(path, text):
    return path in ENTRY or 'const struct cli_verb cli_verb_' in text


def check_file(path, text, exists):
    errs = []
    if path.endswith(('.c', '.h')):
        if not opens_with_comment(text):
            errs.append(f'{path}: does not open with a comment saying what it is')
        errs += check_includes(path, text, exists)
        errs += check_stdio(path, text)
    if path.endswith('.c') and not path.startswith(('tests/', 'bench/')):
        for name, n, line in long_functions(path, text):
            errs.append(f'{path}:{line}: {name} is {n} lines (at most {MAX_FUNC}: split it into named steps)')
    if re.fullmatch(r'cli/[^/]+\.c', path) and not is_verb_file(path, text):
        errs.append(f'{path}: not a verb; cli/*.c holds the verbs only (move it into a cli/SUBSYSTEM/)')
    return errs


def folder_circles(edges):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return comps


def tree_files():
    r = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], capture_output=True, text=True)
    if r.returncode == 0:
        out = r.stdout.split('\n')
    else:  # not a git checkout (a tarball): every file but the build tree's
        out = [os.path.relpath(os.path.join(d, n)) for d, ds, fs in os.walk('.')
               if not d.startswith(('./build', './.git')) for n in fs]
    return [f for f in out if f.startswith(SOURCE_DIRS) and f.endswith(('.c', '.h')) and os.path.isfile(f)]


def check_tree():
    errs, edges = [], {}
    for f in tree_files():
        text = open(f, errors='replace').read()
        errs += check_file(f, text, os.path.isfile)
        if layer_of(f):
            for inc in INCLUDE.findall(text):
                d = os.path.dirname(inc)
                if os.path.isfile(inc) and d != os.path.dirname(f) and d in LAYERS:
                    edges.setdefault(os.path.dirname(f), set()).add(d)
    for c in folder_circles(edges):
        errs.append('folder circle: ' + ' <-> '.join(c))
    for e in errs:
        print('structure: ' + e)
    if errs:
        print(f'structure: {len(errs)} problem(s) (tests/structure.py; the rules: docs/ARCHITECTURE.md)')
        return 1
    print('structure: layers, includes, function lengths, opening comments, cli/ verbs and '
          'subsystems that do not print ok')
    return 0


def self_test():
    """Each rule, fed a file that breaks it, must fail; a good file passes."""
    ok = True
    known = {'vmm/vm.h', 'vmm/base/log.h', 'cli/sandbox/api_client.h', 'cli/sandbox/sandbox.h',
             'guest-init/ring.h', 'vmm/api/control.h'}
    exists = known.__contains__
    long_body = '\n'.join('\tx++;' for _ in range(MAX_FUNC))
    cases = [
        ('devices/bad.c', '/* a device */\n#include "vmm/vm.h"\n', 'may not include vmm/'),
        ('vmm/bad.c', '/* core */\n#include "vmm/api/control.h"\n', 'may not include vmm/api/'),
        ('vmm/base/bad.c', '/* base */\n#include "log.h"\n', 'not rooted'),
        ('cli/launch/bad.c', '/* x */\n#include "cli/sandbox/api_client.h"\n', 'private header'),
        ('cli/sandbox/bad.c', '/* x */\n#include "guest-init/ring.h"\n', 'guest-init/ is the guest'),
        ('vmm/bad2.c', '#include "vmm/base/log.h"\n', 'opening comment'.replace('opening comment',
                                                                            'does not open with a comment')),
        ('vmm/bad3.c', '/* x */\nstatic int f(void)\n{\n' + long_body + '\n}\n', 'f is 202 lines'),
        ('cli/helper.c', '/* x */\nint helper(void);\n', 'not a verb'),
        ('cli/images/bad.c', '/* x */\nvoid f(void)\n{\n\tfprintf(stderr, "x\\n");\n}\n', 'writes to stderr'),
        ('cli/images/bad2.c', '/* x */\nvoid f(void)\n{\n\tperror("x");\n}\n', 'writes to stderr'),
        ('cli/images/bad3.c', '/* x */\nvoid f(void)\n{\n\tfputs("x",\n\t      stderr);\n}\n', 'writes to stderr'),
        ('cli/images/bad4.c', '/* x */\nvoid f(void)\n{\n\tprintf("%d", 1);\n}\n', 'writes to stderr'),
        ('cli/images/bad5.c', '/* x */\nvoid f(void)\n{\n\tdprintf(STDERR_FILENO, "x");\n}\n', 'writes to stderr'),
        ('cli/images/bad6.c', '/* x */\nvoid f(void)\n{\n\twarnx("x");\n}\n', 'writes to stderr'),
    ]
    for path, text, want in cases:
        errs = check_file(path, text, exists)
        if not any(want in e for e in errs):
            print(f'structure self-test: {path} should fail with "{want}", got {errs}')
            ok = False
    good = ('cli/good.c', '/* vmm good: a verb. */\n#include "vmm/base/log.h"\n#include "cli/sandbox/sandbox.h"\n'
            'const struct cli_verb cli_verb_good = { 0 };\nstatic int g(void)\n{\n\treturn 0;\n}\n')
    errs = check_file(good[0], good[1], exists)
    if errs:
        print(f'structure self-test: a good file failed: {errs}')
        ok = False
    # Quoting a call in a message or a comment is no hit; writing to a
    # FILE * the verb passed is not either; an allowed count is exact.
    quiet = ('/* fprintf(stderr, ...) */\nint f(FILE *o, char *e)\n{\n\tfprintf(o, "x");\n'
             '\treturn cli_seterr(e, 9, -1, "printf(\\"%s\\"", "perror(");\n}\n')
    if check_stdio('cli/images/good.c', quiet):
        print(f'structure self-test: a file that does not print failed: {check_stdio("cli/images/good.c", quiet)}')
        ok = False
    two = '/* x */\nvoid f(void)\n{\n\tputs("a");\n\tputs("b");\n}\n'
    if (check_stdio('cli/x/a.c', two, {'cli/x/a.c': (2, '')}) or
            not check_stdio('cli/x/a.c', two, {'cli/x/a.c': (1, '')}) or
            not check_stdio('cli/x/a.c', two, {'cli/x/a.c': (3, '')})):
        print('structure self-test: STDIO_ALLOW counts are not exact')
        ok = False
    if check_stdio('cli/verb.c', two):
        print('structure self-test: a verb (cli/*.c) may print')
        ok = False
    if folder_circles({'a': {'b'}, 'b': {'a'}, 'c': {'a'}}) != [['a', 'b']]:
        print('structure self-test: the circle a <-> b was not found')
        ok = False
    # The whole program on a tree with one bad include fails.
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, 'devices'))
        os.makedirs(os.path.join(d, 'vmm'))
        open(os.path.join(d, 'vmm/vm.h'), 'w').write('/* the VM */\n')
        open(os.path.join(d, 'devices/x.c'), 'w').write('/* a device */\n#include "vmm/vm.h"\n')
        subprocess.run(['git', 'init', '-q', d], check=True)
        r = subprocess.run([sys.executable, os.path.abspath(__file__)], cwd=d, capture_output=True, text=True)
        if r.returncode == 0 or 'may not include vmm/' not in r.stdout:
            print(f'structure self-test: a tree with devices/x.c including vmm/vm.h passed: {r.stdout}')
            ok = False
    print('structure self-test: ' + ('ok' if ok else 'FAILED'))
    return 0 if ok else 1


if __name__ == '__main__':
    if sys.argv[1:] == ['--self-test']:
        sys.exit(self_test())
    sys.exit(check_tree())
