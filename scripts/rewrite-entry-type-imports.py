#!/usr/bin/env python3
# Issue 14: type-only imports of the public types from the package entry (src/index.ts). --apply writes; without it, lists.
import re, os, sys
root=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
idx=open(f'{root}/src/index.ts').read()
exports={}  # name -> abs module path
for m in re.finditer(r"export\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'", idx):
    mod=os.path.normpath(os.path.join(root,'src',m.group(2)))
    for spec in m.group(1).split(','):
        spec=spec.strip()
        if not spec: continue
        spec=re.sub(r'^type\s+','',spec)
        if ' as ' in spec: continue
        exports[spec]=mod
apply='--apply' in sys.argv
changed=[]
for d in ['test','bench','chaos']:
    for dp,_,fs in os.walk(f'{root}/{d}'):
        for f in fs:
            if not f.endswith('.ts'): continue
            p=os.path.join(dp,f); s=open(p).read(); orig=s
            def rep(m):
                specs=[x.strip() for x in m.group(2).split(',') if x.strip()]
                mod=os.path.normpath(os.path.join(dp,m.group(3)))
                names=[re.sub(r'^type\s+','',x) for x in specs]
                if any(' as ' in n for n in names): return m.group(0)
                if not (m.group(1).strip().endswith('type') or all(x.startswith('type ') for x in specs)): return m.group(0)
                if not all(exports.get(n)==mod for n in names): return m.group(0)
                rel=os.path.relpath(f'{root}/src/index.ts',dp)
                if not rel.startswith('.'): rel='./'+rel
                return f"{m.group(1)}{{{m.group(2)}}} from '{rel}'"
            s=re.sub(r"(import\s+(?:type\s+)?)\{([^}]*)\}\s+from\s+'([^']+)'", rep, s)
            if s!=orig:
                changed.append(os.path.relpath(p,root))
                if apply: open(p,'w').write(s)
print(len(changed)); print('\n'.join(changed))
