"""The page's stylesheet (inlined into the HTML; system fonts only, nothing fetched)."""

CSS = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--soft:#f6f7f9;--neg:#b42318;--pos:#0b6bcb;--warn:#b54708}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif;-webkit-font-smoothing:antialiased}
main{max-width:1120px;margin:0 auto;padding:32px 24px 64px}
header{border-bottom:1px solid var(--line);padding-bottom:14px;margin-bottom:8px}
h1{font-size:28px;margin:0 0 4px;letter-spacing:-.01em}
h2{font-size:20px;margin:40px 0 10px;padding-top:8px;letter-spacing:-.005em}
h3{font-size:16px;margin:26px 0 8px}
p{margin:8px 0 12px;max-width:78ch}
.lede{color:var(--muted);margin:0 0 10px}
nav{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:14px}
nav a{color:var(--pos);text-decoration:none}
nav a:hover{text-decoration:underline}
code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);padding:1px 4px;border-radius:4px}
.scroll{overflow-x:auto;margin:10px 0 18px}
table{border-collapse:collapse;font-size:13.5px;min-width:50%}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:middle}
th{font-weight:600;background:var(--soft);border-bottom:1px solid #d1d5db;vertical-align:bottom;white-space:nowrap}
th small{display:block;font-weight:400;color:var(--muted);font-size:11.5px;white-space:normal;max-width:18ch}
td small{color:var(--muted)}
tbody tr:hover td{background:#fafbfc}
table.grouped td{border-bottom-color:#f0f1f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.label{font-weight:500;white-space:nowrap}
.neg{color:var(--neg)}
.pos{color:var(--pos)}
.warn{color:var(--warn);font-weight:600}
.missing{color:#9ca3af}
.ci{color:var(--muted);font-size:12px}
td .v{font-weight:600}
figure{margin:14px 0 20px;padding:14px 14px 8px;border:1px solid var(--line);border-radius:10px;background:#fff;overflow-x:auto}
figure svg.plot{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{color:var(--muted);font-size:13px;margin-top:8px}
.formula{font-size:15px;background:var(--soft);border-left:3px solid var(--pos);padding:8px 12px;border-radius:4px;max-width:none}
ul.headline{columns:2 360px;padding-left:18px;font-variant-numeric:tabular-nums}
ul.headline li{margin:2px 0;break-inside:avoid}
.stats{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.stat{flex:1 1 220px;border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.stat .k{color:var(--muted);font-size:13px}
.stat .big{font-size:28px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.25}
details{margin:6px 0;border:1px solid var(--line);border-radius:8px;padding:4px 12px}
details summary{cursor:pointer;font-weight:500;padding:4px 0}
details .scroll{margin-top:4px}
#notes ul{padding-left:18px;max-width:86ch}
#notes li{margin:6px 0}
@media print{nav{display:none}details{border:none}details>*{display:block}}
"""
