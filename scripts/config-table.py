#!/usr/bin/env python3
"""Prints the key table of docs/config.md from Sources/Soundbox/Config.swift,
so the documentation lists exactly the keys, defaults and ranges the code has.
    python3 scripts/config-table.py
"""
import re, pathlib
src = (pathlib.Path(__file__).parent.parent / "Sources/Soundbox/Config.swift").read_text()
pattern = re.compile(r'ConfigKey\(name: "([^"]+)", defaultValue: "([^"]*)", kind: (\.\w+(?:\((?:[^()]|\([^)]*\))*\))?)'
                     r'(?:,\s*runtime: (false))?,\s*help: "((?:[^"\\]|\\.)*)"\)', re.S)
print("| key | default | allowed | set at runtime | meaning |")
print("|---|---|---|---|---|")
for name, default, kind, runtime, help_ in pattern.findall(src):
    if kind.startswith(".integer"):
        lo, hi = re.search(r"(\d[\d_]*)\.\.\.(\d[\d_]*)", kind).groups()
        allowed = f"{lo.replace('_', '')}–{hi.replace('_', '')}"
    elif kind.startswith(".choice"):
        allowed = ", ".join(f"`{x}`" for x in re.findall(r'"([^"]+)"', kind))
    elif kind == ".amount":
        allowed = "amount 0.01–999999999999.99"
    else:
        allowed = "text"
    runtime_text = "no (restart)" if runtime else "yes"
    print(f"| `{name}` | `{default}` | {allowed} | {runtime_text} | {help_} |")
