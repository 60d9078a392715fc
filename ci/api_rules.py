#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The public C headers read as data: an inventory of every symbol, and the
API rules of docs/api-rules.md that can be checked by machine.

  api_rules.py inventory [ROOT]        every symbol: kind, name, file:line, signature
  api_rules.py check [ROOT]            every rule broken: file:line: Rn: what; exit 1 if any
  api_rules.py table-check DOC [ROOT]  symbols the 1.0 table (DOC) has no row for

Reads include/dlock.h, include/dlock/*.h and cmake/version.h.in (the
installed dlock/version.h); not dlock.hpp, which wraps the C API.
"""
import os
import re
import sys

ROOT = None


# --- reading the headers -------------------------------------------------

def strip_comments(src):
    """Comments to spaces (newlines kept, so positions keep their line)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def blank(m):
    return re.sub(r'[^\n]', ' ', m.group(0))


class Sym:
    def __init__(self, kind, name, path, line, sig='', **kw):
        self.kind, self.name, self.path, self.line, self.sig = kind, name, path, line, sig
        self.__dict__.update(kw)

    @property
    def where(self):
        return '%s:%d' % (self.path, self.line)


def norm(s):
    s = re.sub(r'\s+', ' ', s).strip()
    s = re.sub(r'\s*\*\s*', ' *', s)
    s = re.sub(r'\*\s+\*', '**', s).replace('* *', '**')
    s = re.sub(r'\(\s+', '(', s)
    return re.sub(r'\s+\)', ')', s)


def split_top(s, sep):
    parts, depth, cur = [], 0, []
    for c in s:
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        if c == sep and depth == 0:
            parts.append(''.join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append(''.join(cur))
    return parts


def parse_param(p):
    """'const char *owner' -> (type 'const char *', name 'owner', array size or None)."""
    p = norm(p)
    if p in ('', 'void'):
        return None
    m = re.match(r'^(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$', p)
    if m:  # a function pointer
        return (norm(m.group(1)) + ' (*)(' + m.group(3) + ')', m.group(2), None)
    m = re.match(r'^(.*?)(\w+)\s*\[([^\]]*)\]$', p)
    if m:
        return (norm(m.group(1)), m.group(2), m.group(3).strip() or '?')
    m = re.match(r'^(.*?)(\w+)$', p)
    if not m:
        return (p, '', None)
    return (norm(m.group(1)), m.group(2), None)


def parse_params(s):
    return [x for x in (parse_param(p) for p in split_top(s, ',')) if x]


def read_header(path, rel):
    src = open(path, encoding='utf-8').read()
    text = strip_comments(src)
    syms, includes = [], []
    lineof = lambda pos: text.count('\n', 0, pos) + 1
    # extern "C" { ... } guards are not statements
    text = re.sub(r'#ifdef __cplusplus\s*\nextern "C" \{\s*\n#endif', blank, text)
    text = re.sub(r'#ifdef __cplusplus\s*\n\}\s*\n#endif', blank, text)
    # preprocessor lines (with their continuations)
    for m in re.finditer(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', text, re.M):
        d = m.group(0)
        md = re.match(r'\s*#\s*define\s+(\w+)(\([^)]*\))?\s*(.*)', d, re.S)
        if md:
            syms.append(Sym('macro', md.group(1), rel, lineof(m.start()),
                            norm(md.group(1) + (md.group(2) or '') + ' ' +
                                 md.group(3).replace('\\\n', ' '))))
        mi = re.match(r'\s*#\s*include\s+([<"])([^>"]+)[>"]', d)
        if mi:
            includes.append((mi.group(2), mi.group(1) == '<', lineof(m.start())))
    text = re.sub(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', blank, text, flags=re.M)

    # top-level statements; function bodies skipped
    i, n, start, depth = 0, len(text), None, 0
    stmts = []
    while i < n:
        c = text[i]
        if start is None and not c.isspace():
            start = i
        if c == '{':
            if depth == 0 and re.search(r'\)\s*$', text[start:i]):  # a definition
                body_depth, j = 0, i
                while j < n:
                    if text[j] == '{':
                        body_depth += 1
                    elif text[j] == '}':
                        body_depth -= 1
                        if body_depth == 0:
                            break
                    j += 1
                stmts.append((start, text[start:i], True))
                start, i = None, j + 1
                continue
            depth += 1
        elif c == '}':
            depth -= 1
        elif c == ';' and depth == 0:
            stmts.append((start, text[start:i], False))
            start = None
        i += 1

    # the doc comment of each statement: the comments between it and the one
    # before; a plain /* comment that speaks of the calls "below" covers them
    # up to the next typedef. A declaration without a comment, right below
    # (no blank line) one whose name starts its own (unlock, unlock_as),
    # shares that one's: resolved in share_docs().
    docs, prev_end, group = [], 0, ''
    for pos, st, is_def in stmts:
        gap = src[prev_end:pos]
        cms = re.findall(r'/\*.*?\*/', gap, re.S)
        for c in cms:
            if not c.startswith('/**'):
                group = c if 'below' in c else ''
        if st.lstrip().startswith('typedef'):
            group = ''
        own = cms[-1] if cms else None
        adjacent = own is None and '\n\n' not in gap.replace(' ', '').replace('\t', '')
        docs.append((own or '') + ('\n' + group if group else '') if not adjacent else None)
        prev_end = pos + len(st) + 1

    for (pos, st, is_def), doc in zip(stmts, docs):
        line = lineof(pos)
        s = norm(st)
        if is_def:
            m = re.match(r'^(static inline) (.*?)(\w+)\((.*)\)$', s, re.S)
            if m:
                syms.append(Sym('inline', m.group(3), rel, line,
                                norm(m.group(2) + m.group(3) + '(' + m.group(4) + ')'),
                                ret=norm(m.group(2)), params=parse_params(m.group(4))))
            continue
        m = re.match(r'^DLOCK_EXTERN extern (.*?)(\w+)\s*(\[.*\])?$', s)
        if m:
            syms.append(Sym('variable', m.group(2), rel, line, s[len('DLOCK_EXTERN '):]))
            continue
        m = re.match(r'^DLOCK_EXTERN (.*?)(\w+)\((.*)\)$', s, re.S)
        if m:
            syms.append(Sym('function', m.group(2), rel, line,
                            norm(m.group(1) + m.group(2) + '(' + m.group(3) + ')'),
                            ret=norm(m.group(1)), params=parse_params(m.group(3)), doc=doc))
            share_docs(syms)
            continue
        m = re.match(r'^typedef struct (\w+) (\w+)$', s)
        if m:
            syms.append(Sym('opaque', m.group(2), rel, line, 'typedef struct %s %s' %
                            (m.group(1), m.group(2))))
            continue
        m = re.match(r'^typedef (struct|enum) (\w+) ?\{(.*)\} ?(\w+)$', s, re.S)
        if m:
            tag, body, name = m.group(1), m.group(3), m.group(4)
            bstart = pos + st.index('{') + 1
            if tag == 'enum':
                consts = []
                off = 0
                for part in split_top(st[st.index('{') + 1:st.rindex('}')], ','):
                    nm = re.match(r'\s*(\w+)', part)
                    if nm:
                        cpos = bstart + off + part.index(nm.group(1))
                        consts.append(nm.group(1))
                        syms.append(Sym('enumconst', nm.group(1), rel, lineof(cpos),
                                        norm(part), enum=name))
                    off += len(part) + 1
                syms.append(Sym('enum', name, rel, line, 'typedef enum %s' % name,
                                consts=consts))
            else:
                fields = []
                raw = st[st.index('{') + 1:st.rindex('}')]
                off = 0
                for part in split_top(raw, ';'):
                    p = parse_param(part)
                    if p and p[1]:
                        fpos = bstart + off + len(part) - len(part.lstrip())
                        fields.append(p)
                        syms.append(Sym('field', name + '.' + p[1], rel, lineof(fpos),
                                        norm(part), struct=name, ftype=p[0], index=len(fields) - 1))
                    off += len(part) + 1
                syms.append(Sym('struct', name, rel, line, 'typedef struct %s {...}' % name,
                                fields=fields))
            continue
        m = re.match(r'^typedef (.*?)\(\s*\*\s*(\w+)\)\s*\((.*)\)$', s, re.S)
        if m:
            syms.append(Sym('callback', m.group(2), rel, line, s,
                            ret=norm(m.group(1)), params=parse_params(m.group(3))))
            continue
        if re.match(r'^struct \w+$', s):
            continue  # a forward declaration
        syms.append(Sym('unparsed', s[:40], rel, line, s))
    return syms, includes


def share_docs(syms):
    """A function without a doc of its own (None) shares the one above it
    when that one's name starts its name; else it has none."""
    fs = [x for x in syms if x.kind == 'function']
    f = fs[-1]
    if f.doc is None:
        prev = fs[-2] if len(fs) > 1 else None
        f.doc = prev.doc if prev is not None and f.name.startswith(prev.name) else ''


def headers(root):
    inc = os.path.join(root, 'include')
    files = [('include/dlock.h', os.path.join(inc, 'dlock.h'))]
    for f in sorted(os.listdir(os.path.join(inc, 'dlock'))):
        if f.endswith('.h'):
            files.append(('include/dlock/' + f, os.path.join(inc, 'dlock', f)))
    v = os.path.join(root, 'cmake', 'version.h.in')
    if os.path.exists(v):
        files.append(('cmake/version.h.in', v))
    return files


def load(root):
    syms, incs = [], {}
    for rel, path in headers(root):
        s, i = read_header(path, rel)
        syms += s
        incs[rel] = i
    return syms, incs


# --- the inventory -------------------------------------------------------

def inventory(root):
    syms, _ = load(root)
    for s in syms:
        print('%s\t%s\t%s\t%s' % (s.kind, s.name, s.where, s.sig))
    return 0


def table_rows(text):
    """The names the table has a row for: each row's first cell (a 0.x name,
    or a name added in 1.0), and the 1.0 name a row's third cell gives its
    0.x symbol (a function's `... name(...)`, a field's `type name`, an
    opaque `typedef struct name name`), so that the table, keyed by 0.x
    names, stays the migration record while the headers take the new ones."""
    rows = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split('|')]
        if len(cells) < 4 or not cells[1].startswith('`'):
            continue
        key = cells[1].strip('`')
        rows.add(key)
        for span in re.findall(r'`([^`]+)`', cells[3]):
            rows.update(re.findall(r'\b(dlock_\w+|DLOCK_\w+)\s*\(', span))
            rows.update(re.findall(r'typedef struct \w+ (\w+);', span))
            field = re.match(r'^[\w\s*]*?\b(\w+)\s*(\[[^\]]*\])?$', span)
            if '.' in key and field and ' ' in span:
                rows.add(key.split('.')[0] + '.' + field.group(1))
    return rows


def table_check(doc, root):
    """Every inventoried symbol needs a table row (table_rows)."""
    syms, _ = load(root)
    rows = table_rows(open(doc, encoding='utf-8').read())
    missing = [s for s in syms if s.name not in rows and not s.name.endswith('_H')]
    for s in missing:
        print('%s: %s %s has no row in %s' % (s.where, s.kind, s.name, doc))
    print('%d symbols, %d without a row' % (len(syms), len(missing)), file=sys.stderr)
    return 1 if missing else 0


# --- the rules -----------------------------------------------------------

# Rule R14: which header declares a name: the longest prefix that matches.
HOME = [
    ('dlock_client_', 'client.h'), ('dlock_holder', 'client.h'), ('dlock_thread_id', 'client.h'),
    ('DLOCK_CLIENT_', 'client.h'), ('DLOCK_OWNER_', 'client.h'),
    ('dlock_lock_', 'lock.h'), ('DLOCK_LOCK_', 'lock.h'), ('DLOCK_FAIR_', 'lock.h'),
    ('dlock_multilock_', 'multilock.h'), ('DLOCK_MULTILOCK_', 'multilock.h'),
    ('dlock_member_status', 'multilock.h'), ('DLOCK_MEMBER_STATUS', 'multilock.h'),
    ('dlock_vote', 'multilock.h'), ('DLOCK_VOTE_', 'multilock.h'),
    ('dlock_redlock_', 'redlock.h'), ('DLOCK_REDLOCK_', 'redlock.h'),
    ('dlock_semaphore_', 'semaphore.h'), ('DLOCK_SEMAPHORE_', 'semaphore.h'),
    ('DLOCK_PERMIT_', 'semaphore.h'),
    ('dlock_countdown_', 'countdown.h'), ('DLOCK_COUNTDOWN_', 'countdown.h'),
    ('dlock_loop_', 'loop.h'), ('DLOCK_LOOP_', 'loop.h'), ('DLOCK_POLL_', 'loop.h'),
    ('dlock_op', 'async.h'), ('dlock_result', 'async.h'),
    ('dlock_stat', 'stats.h'), ('DLOCK_STAT_', 'stats.h'),
    ('dlock_uv', 'uv.h'), ('dlock_libevent', 'libevent.h'), ('dlock_event', 'event.h'),
    ('dlock_strerror', 'errors.h'), ('dlock_errmsg_last', 'errors.h'), ('dlock_error', 'errors.h'),
    ('DLOCK_E', 'errors.h'), ('DLOCK_OK', 'errors.h'),
    ('dlock_version', 'version.h.in'), ('DLOCK_VERSION', 'version.h.in'),
    ('dlock_lost', 'common.h'), ('DLOCK_LOST_', 'common.h'), ('dlock_allocator', 'common.h'),
    ('DLOCK_ALLOCATOR', 'common.h'), ('dlock_set_allocator', 'common.h'),
    ('DLOCK_WAIT_', 'common.h'), ('DLOCK_LEASE_', 'common.h'), ('DLOCK_EXTERN', 'common.h'),
]

# R13: a header includes only headers before it in this order.
LAYERS = ['common.h', 'errors.h', 'version.h', 'stats.h', 'loop.h', 'async.h', 'client.h',
          'lock.h', 'multilock.h', 'redlock.h', 'semaphore.h', 'countdown.h',
          'uv.h', 'event.h', 'libevent.h']

ADAPTER_HEADERS = ('include/dlock/uv.h', 'include/dlock/event.h', 'include/dlock/libevent.h')

# R5: a call about a hold of these takes the verbs acquire/try? no: acquire/release.
OLD_VERBS = re.compile(r'_(lock|try|unlock|force_unlock|try_as|unlock_as|try_fenced|'
                       r'acquire_as|release_as|is_held_as|hold_count_as)$')


def home_of(name):
    best = None
    for pre, h in HOME:
        if name.startswith(pre) and (best is None or len(pre) > len(best[0])):
            best = (pre, h)
    return best[1] if best else None


def check(root):
    syms, incs = load(root)
    bad = []

    def fail(s, rule, msg, where=None):
        bad.append('%s: %s: %s' % (where or s.where, rule, msg))

    funcs = [s for s in syms if s.kind in ('function', 'inline')]
    byname = {s.name: s for s in syms}
    opaque = {s.name for s in syms if s.kind == 'opaque'}
    structs = {s.name: s for s in syms if s.kind == 'struct'}
    fnames = {f.name for f in funcs}
    # handles: opaque types with a constructor (_new), not snapshots, ops or adapters
    handles = sorted({t for t in opaque
                      if not t.endswith('_info') and t != 'dlock_op'} |
                     {f.name[:-4] for f in funcs if f.name.endswith('_new')})

    for s in syms:
        if s.kind == 'unparsed':
            fail(s, 'R0', 'a declaration this checker cannot read: ' + s.sig[:60])
        # R1: prefixes; no internal (double underscore) names in a public header
        if s.kind == 'macro' and s.name.endswith('_H'):
            continue
        low = s.kind in ('function', 'inline', 'variable', 'opaque', 'struct', 'enum',
                         'callback')
        if low and not s.name.startswith('dlock_'):
            fail(s, 'R1', '%s is not prefixed dlock_' % s.name)
        if s.kind in ('macro', 'enumconst') and not s.name.startswith('DLOCK_'):
            fail(s, 'R1', '%s is not prefixed DLOCK_' % s.name)
        if '__' in s.name.strip('_') and s.kind != 'field':
            fail(s, 'R1', '%s: an internal name (double underscore) in a public header' % s.name)
        # R15: no exported variables
        if s.kind == 'variable':
            fail(s, 'R15', '%s is an exported variable: reach data through a function' % s.name)
        # R14: each name in its module's header
        h = home_of(s.name) if s.kind != 'field' else None
        if h and os.path.basename(s.path) != h and s.kind not in ('enumconst',):
            fail(s, 'R14', '%s belongs in dlock/%s' % (s.name, h))

    # R16: public headers declare, they define no code; handles are opaque
    for f in funcs:
        if f.kind == 'inline':
            fail(f, 'R16', '%s: a function body in a public header (compile it into a library)'
                 % f.name)
    for t in handles:
        if t in structs:
            fail(structs[t], 'R16', '%s is a handle (it has _new) with its fields in the '
                 'header: make it opaque' % t)

    for f in funcs:
        n, ps = f.name, f.params
        types = [p[0] for p in ps]
        # R2: one constructor verb and one destructor verb
        if re.search(r'_(open|close|create|destroy|delete_handle)$', n) and \
                n[:n.rindex('_')] in handles:
            fail(f, 'R2', '%s: constructors are dlock_X_new, destructors dlock_X_free' % n)
        if n.endswith('_free'):
            if f.ret != 'void':
                fail(f, 'R3', '%s returns %s: a destructor returns void and cannot fail'
                     % (n, f.ret))
        # R4: constructors: out first, options last
        m = re.match(r'^(dlock_\w+?)_new(_from_\w+)?$', n)
        if m and m.group(1) in handles:
            t = m.group(1)
            if not types or types[0] != t + ' **':
                fail(f, 'R4', '%s: a constructor\'s first parameter is %s **out' % (n, t))
            if not types or types[-1] != 'const %s_options *' % t:
                fail(f, 'R4', '%s: a constructor\'s last parameter is const %s_options *opts'
                     % (n, t))
        # R5: one verb per action: acquire/release, the owner a parameter
        if OLD_VERBS.search(n) and not n.startswith(('dlock_uv', 'dlock_event')):
            fail(f, 'R5', '%s: the verbs are acquire/release (owner as a parameter, no _as)' % n)
        elif n.endswith('_as') or '_as_' in n:
            fail(f, 'R5', '%s: no _as variants: every call about a hold takes owner' % n)
        if '_get_' in n:
            fail(f, 'R5', '%s: a query is named by its noun, without get_' % n)
        # R7: async shape and twins
        if n.endswith('_async'):
            if not types or types[0] != 'dlock_op **':
                fail(f, 'R7', '%s: an _async call\'s first parameter is dlock_op **out' % n)
            if types[-2:] != ['dlock_op_cb', 'void *'] or [p[1] for p in ps[-2:]] != \
                    ['cb', 'userdata']:
                fail(f, 'R7', '%s: an _async call ends with (dlock_op_cb cb, void *userdata)' % n)
            twin = byname.get(n[:-len('_async')])
            if twin is None and not n.endswith('_watch_async'):
                fail(f, 'R7', '%s has no blocking twin %s' % (n, n[:-len('_async')]))
            elif twin is not None and twin.kind in ('function', 'inline'):
                tps = list(twin.params)
                while tps and is_out(tps[0][0], opaque, tps[0][2]):
                    tps.pop(0)  # char id[DLOCK_PERMIT_ID_SIZE] is an out-param too
                tin = [p[0] for p in tps]
                if [t.replace(' const', '') for t in types[1:-2]] != tin:
                    fail(f, 'R7', '%s takes (%s) where its twin %s takes (%s) after its '
                         'out-params' % (n, ', '.join(types[1:-2]), twin.name, ', '.join(tin)))
        # R8: results of operations are in dlock_result, no getters on ops
        if any(t in ('const dlock_op *', 'dlock_op *') for t in types) and \
                n not in ('dlock_op_cancel', 'dlock_op_free'):
            fail(f, 'R8', '%s reads an op: results are fields of dlock_result' % n)
        # R9: out-params first
        seen_in = False
        for i, p in enumerate(ps):
            if is_out(p[0], opaque, p[2]):
                if seen_in and not (p[0] == 'char *' and i + 1 < len(ps) and
                                    ps[i + 1][0] == 'size_t'):
                    fail(f, 'R9', '%s: out-parameter %s after an input' % (n, p[1]))
                    break
            else:
                seen_in = True
        # R10: buffers: (char *buf, size_t len) or char x[DLOCK_*_SIZE]
        for i, p in enumerate(ps):
            if p[0] == 'char *' and p[2] is None and not (
                    i + 1 < len(ps) and ps[i + 1][0] == 'size_t'):
                fail(f, 'R10', '%s: char *%s without a size: pass (char *buf, size_t len) '
                     'or use char %s[DLOCK_..._SIZE]' % (n, p[1], p[1]))
            if p[2] is not None and not re.match(r'^DLOCK_\w+_SIZE$', p[2]):
                fail(f, 'R10', '%s: array %s[%s] is not sized by a DLOCK_*_SIZE constant'
                     % (n, p[1], p[2]))
            if p[0] == 'char *' and i + 1 < len(ps) and ps[i + 1][0] == 'size_t' and \
                    f.ret not in ('size_t',):
                fail(f, 'R10', '%s writes into (buf, len) but returns %s: it returns the '
                     'full length as size_t (snprintf)' % (n, f.ret))
        # R11: every lost callback is dlock_lost_cb
        if n.endswith('_set_lost_cb') and 'dlock_lost_cb' not in types:
            fail(f, 'R11', '%s takes %s: every lost callback is dlock_lost_cb' %
                 (n, types[1] if len(types) > 1 else '?'))

    # R7: every call that talks to a server has an _async twin. A call talks
    # when its doc comment names a server's errors (errors.h's sets,
    # DLOCK_ECONN, "read the server"), or says its errors are those of one
    # that talks; "no network traffic"/"sends nothing" says it does not.
    talks = server_calls(funcs)
    for f in funcs:
        twin = re.sub(r'_fenced$', '', f.name) + '_async'  # the token is in the result
        if f.name in talks and twin not in fnames and \
                not re.search(r'_new(_from_\w+)?$|_free$|_init$', f.name):
            fail(f, 'R7', '%s talks to a server and has no %s twin' % (f.name, twin))

    # R6: errmsg and errmsg_r for every handle
    for t in handles:
        if os.path.basename(byname[t].path if t in byname else '') in \
                tuple(os.path.basename(a) for a in ADAPTER_HEADERS):
            continue
        where = byname[t] if t in byname else None
        for suffix, params in (('_errmsg', ['const %s *' % t]),
                               ('_errmsg_r', ['char *', 'size_t', 'const %s *' % t])):
            g = byname.get(t + suffix)
            if g is None:
                fail(where, 'R6', '%s has no %s%s(%s)' % (t, t, suffix, ', '.join(params)))
            elif [p[0] for p in g.params] != params:
                fail(g, 'R6', '%s%s takes (%s), not (%s)' % (
                    t, suffix, ', '.join(p[0] for p in g.params), ', '.join(params)))

    # R11: one lost-callback type
    for s in syms:
        if s.kind == 'callback':
            if 'lost' in s.name and s.name != 'dlock_lost_cb':
                fail(s, 'R11', '%s: every lost callback is dlock_lost_cb' % s.name)
            if s.name == 'dlock_lost_cb' and [p[0] for p in s.params] != \
                    ['const dlock_lost_event *', 'void *']:
                fail(s, 'R11', 'dlock_lost_cb is not (const dlock_lost_event *ev, void *userdata)')
            # R12: what a callback hands back is void *userdata, last
            if not s.params or s.params[-1][0] != 'void *' or s.params[-1][1] != 'userdata':
                fail(s, 'R12', '%s: a callback\'s last parameter is void *userdata' % s.name)
    for s in syms:
        if s.kind == 'field' and s.ftype == 'void *' and not (
                s.name.endswith('.userdata') or s.name.endswith('_userdata')):
            if os.path.normpath(s.path) in ADAPTER_HEADERS:
                continue
            fail(s, 'R12', '%s: the pointer handed back to a callback is named userdata' % s.name)

    # R17: versioned structs: version first, DLOCK_X_VERSION, DLOCK_X_INIT, dlock_X_init
    caller_mem = set()
    for f in funcs:
        if f.name.endswith(('_free', '_init')):
            continue
        for p in f.params:
            m = re.match(r'^(const )?(dlock_\w+) \*$', p[0])
            if m and m.group(2) in structs:
                caller_mem.add(m.group(2))
    for name, s in sorted(structs.items()):
        if name in handles:
            continue
        versioned = s.fields and s.fields[0][1] == 'version'
        if (name.endswith('_options') or name in caller_mem) and not versioned:
            fail(s, 'R17', '%s is caller memory: its first field is unsigned int version' % name)
            continue
        if not versioned:
            continue
        if s.fields[0][0] != 'unsigned int':
            fail(s, 'R17', '%s.version is %s, not unsigned int' % (name, s.fields[0][0]))
        up = name.upper()
        for mac in (up + '_VERSION', up + '_INIT'):
            if mac not in byname:
                fail(s, 'R17', '%s has no %s' % (name, mac))
        init = byname.get(name + '_init')
        want = ['%s *' % name, 'unsigned int']
        if init is None:
            fail(s, 'R17', '%s has no int %s_init(%s *, unsigned int version)' % (name, name, name))
        elif [p[0] for p in init.params] != want or init.ret != 'int':
            fail(init, 'R17', '%s_init is not int (%s)' % (name, ', '.join(want)))

    # R13: headers include only headers below them
    for rel, lst in sorted(incs.items()):
        me = os.path.basename(rel)
        if me not in LAYERS:
            continue
        for inc, system, line in lst:
            b = os.path.basename(inc)
            if system or b not in LAYERS:
                continue
            if LAYERS.index(b) >= LAYERS.index(me):
                bad.append('%s:%d: R13: %s includes %s, a module above it (order: %s)' %
                           (rel, line, me, b, ' < '.join(LAYERS[:12])))

    for b in bad:
        print(b)
    print('%d violation(s) of docs/api-rules.md in include/' % len(bad), file=sys.stderr)
    return 1 if bad else 0


TALK = re.compile(r"errors\.h|DLOCK_ECONN|DLOCK_ENOQUORUM|one command|a wait's final|"
                  r"quorum's errors|read the server")
QUIET = re.compile(r'[Nn]o (network )?traffic|sends nothing')


def server_calls(funcs):
    talks = set()
    for _ in range(3):  # "errors as dlock_x()" may point forward
        for f in funcs:
            doc = getattr(f, 'doc', '') or ''
            if f.name.endswith('_async') or QUIET.search(doc):
                continue
            refs = re.findall(r'(dlock_\w+)\(\)', doc)
            inherits = re.search(r'\b[Aa]s dlock_|[Ee]rrors as|for an explicit owner', doc) and \
                any(r in talks for r in refs if r != f.name)
            if TALK.search(doc) or inherits:
                talks.add(f.name)
    return talks


def is_out(t, opaque, array=None):
    """A parameter the call writes its answer through."""
    if array is not None:
        return not t.startswith('const')
    if t.startswith('const') or t in ('void *',) or '(*)' in t:
        return False
    if t.endswith('**'):
        return True
    m = re.match(r'^(\w+) \*$', t)
    if not m:
        return False
    base = m.group(1)
    return base not in opaque  # a handle is an input; a scalar or a struct is an answer


def main(argv):
    if len(argv) < 2 or argv[1] not in ('inventory', 'check', 'table-check'):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[1] == 'table-check':
        return table_check(argv[2], argv[3] if len(argv) > 3 else default_root())
    root = argv[2] if len(argv) > 2 else default_root()
    return inventory(root) if argv[1] == 'inventory' else check(root)


def default_root():
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))


if __name__ == '__main__':
    sys.exit(main(sys.argv))
