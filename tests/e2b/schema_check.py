#!/usr/bin/env python3
"""Checks JSON answers against schemas of E2B's openapi.yml (the E2B
tier, tests/e2b/host.sh): required members present, types, enums, formats
of date-time, no member the schema does not name where it names them all.

  schema_check.py OPENAPI FILE:SCHEMA [FILE:array:SCHEMA ...]
Exits 1 naming each mismatch."""
import json
import re
import sys

import yaml

DATE_TIME = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$')


def resolve(spec, s):
    while '$ref' in s:
        s = spec['components']['schemas'][s['$ref'].split('/')[-1]]
    return s


def check(spec, schema, v, where, errs):
    s = resolve(spec, schema)
    if v is None:
        if not s.get('nullable'):
            errs.append(f'{where}: null where {s.get("type", "a value")} is due')
        return
    t = s.get('type', 'object' if 'properties' in s else None)
    types = {'string': str, 'integer': int, 'number': (int, float), 'boolean': bool, 'array': list, 'object': dict}
    if t in types and (not isinstance(v, types[t]) or (t in ('integer', 'number') and isinstance(v, bool))):
        errs.append(f'{where}: {json.dumps(v)[:60]} is not {t}')
        return
    if 'enum' in s and v not in s['enum']:
        errs.append(f'{where}: {v!r} not in {s["enum"]}')
    if s.get('format') == 'date-time' and not DATE_TIME.match(v):
        errs.append(f'{where}: {v!r} is not a date-time')
    if 'minimum' in s and v < s['minimum']:
        errs.append(f'{where}: {v} < {s["minimum"]}')
    if t == 'array':
        for i, x in enumerate(v):
            check(spec, s.get('items', {}), x, f'{where}[{i}]', errs)
    if t == 'object':
        props = s.get('properties', {})
        for r in s.get('required', []):
            if r not in v:
                errs.append(f'{where}: required {r} missing')
        for k, x in v.items():
            if k in props:
                check(spec, props[k], x, f'{where}.{k}', errs)
            elif 'additionalProperties' in s:
                ap = s['additionalProperties']
                if isinstance(ap, dict):
                    check(spec, ap, x, f'{where}.{k}', errs)
            elif props:
                errs.append(f'{where}: {k} is not in the schema')


def main():
    spec = yaml.safe_load(open(sys.argv[1]))
    errs = []
    for arg in sys.argv[2:]:
        parts = arg.split(':')
        path, name = parts[0], parts[-1]
        v = json.load(open(path))
        schema = {'$ref': f'#/components/schemas/{name}'}
        if len(parts) == 3 and parts[1] == 'array':
            schema = {'type': 'array', 'items': schema}
            if not v:
                errs.append(f'{path}: an empty array proves nothing')
        check(spec, schema, v, f'{path.split("/")[-1]}({name})', errs)
    for e in errs:
        print('schema:', e)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
