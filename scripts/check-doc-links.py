#!/usr/bin/env python3
"""Checks the relative links of the README and docs/: every [text](path#anchor) names a file that
exists and, for a markdown target, a heading whose GitHub anchor is #anchor.
  scripts/check-doc-links.py [FILE.md...]   (paths from the repository root; default: README.md
  docs/*.md; exit status 1 on a broken link)"""
import glob, os, re, sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
def slugs(path):
    out=set(); counts={}; fence=False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'): fence = not fence; continue
        if fence: continue
        m=re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if not m: continue
        t=m.group(2).lower()
        t=re.sub(r'[^\w\- ]', '', t)
        t=t.replace(' ', '-')
        n=counts.get(t,0); counts[t]=n+1
        out.add(t if n==0 else f'{t}-{n}')
    return out
bad=0
for f in sys.argv[1:] or ['README.md'] + sorted(glob.glob('docs/*.md')):
    text=open(f, encoding='utf-8').read()
    text=re.sub(r'```.*?```', '', text, flags=re.S)
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        link=m.group(1)
        if re.match(r'^[a-z]+://', link) or link.startswith('mailto:'): continue
        path, _, anchor = link.partition('#')
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            print(f'{f}: {link}: no such file {target}'); bad+=1; continue
        if anchor and target.endswith('.md') and anchor not in slugs(target):
            print(f'{f}: {link}: no heading #{anchor} in {target}'); bad+=1
print(f'{bad} broken link(s)'); sys.exit(1 if bad else 0)
