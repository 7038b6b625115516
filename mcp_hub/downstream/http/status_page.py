# ruff: noqa: E501
"""The self-refreshing HTML status page served at ``/``.

Static HTML + a few lines of script that poll ``/status.json`` every two
seconds, so the page needs no template engine and shows nothing the JSON
does not (which is already redacted, and holds only what the signed-in
identity may see: :class:`mcp_hub.hub.access.OpsView`; the header says whose view
a narrow one is).
"""

from __future__ import annotations

__all__ = ["STATUS_PAGE_HTML"]

STATUS_PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mcp-hub status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#f7f8fa}
 h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
 table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px #0001}
 th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e5e7eb;vertical-align:top}
 th{background:#eef1f5;font-weight:600} .muted{color:#6b7280}
 .st{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;color:#fff}
 .ready{background:#15803d}.connecting,.reconnecting{background:#b45309}
 .parked{background:#b91c1c}.needs_login{background:#7c3aed}.disabled{background:#6b7280}.ok{color:#15803d}.error{color:#b91c1c}
</style></head><body>
<h1>mcp-hub</h1><div id="hub" class="muted">loading…</div>
<h2>Upstream servers</h2>
<table id="ups"><thead><tr><th>Server</th><th>State</th><th>Transport</th><th>Tools</th>
<th>Prompts</th><th>Resources</th><th>Reconnects</th><th>Last error</th></tr></thead><tbody></tbody></table>
<h2>Tool search</h2><div id="ts" class="muted"></div>
<h2>Recent calls</h2>
<table id="calls"><thead><tr><th>Tool</th><th>Upstream's name</th><th>Server</th><th>Status</th><th>Latency (ms)</th>
<th>When</th></tr></thead><tbody></tbody></table>
<h2>Calls per identity</h2>
<table id="ids"><thead><tr><th>Identity</th><th>Calls by outcome</th></tr></thead><tbody></tbody></table>
<h2>Rejected tools</h2>
<table id="rej"><thead><tr><th>Tool</th><th>From toolset</th><th>Held by</th><th>Reason</th></tr>
</thead><tbody></tbody></table>
<script>
function esc(s){return String(s==null?"":s).replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]))}
function rows(id,list,f,empty){const tb=document.querySelector("#"+id+" tbody");
 tb.innerHTML=list.length?list.map(f).join(""):"<tr><td colspan=8 class=muted>"+empty+"</td></tr>"}
async function refresh(){
 try{const r=await fetch("status.json",{credentials:"same-origin",cache:"no-store"});
  if(!r.ok){document.getElementById("hub").textContent="status unavailable: HTTP "+r.status;return}
  const s=await r.json();const h=s.hub;
  document.getElementById("hub").textContent=h.name+" "+h.version+" · up "+Math.round(h.uptime_seconds)+" s · "+s.tools.total+" tools · "+h.sessions+" sessions"+(s.view?" · what "+(s.view.identity||"this profile")+" reaches":"");
  rows("ups",s.upstreams,u=>"<tr><td>"+esc(u.name)+"</td><td><span class='st "+esc(u.state)+"'>"+esc(u.state)+"</span></td><td>"+esc(u.transport)+"</td><td>"+u.tools+"</td><td>"+u.prompts+"</td><td>"+u.resources+"</td><td>"+u.reconnects+"</td><td class=muted>"+esc(u.last_error||"")+"</td></tr>","no upstream servers configured");
  const t=s.tool_search;document.getElementById("ts").textContent="mode "+t.mode+" · "+(t.active?"active":"inactive")+" · "+t.deferrable_tokens+" deferrable tokens (threshold "+t.threshold_tokens+")";
  rows("calls",s.recent_calls.slice().reverse(),c=>"<tr><td>"+esc(c.tool)+"</td><td class=muted>"+esc(c.upstream_tool)+"</td><td>"+esc(c.server)+"</td><td class='"+esc(c.status)+"'>"+esc(c.status)+"</td><td>"+Number(c.duration_ms).toFixed(1)+"</td><td class=muted>"+new Date(c.time*1000).toLocaleTimeString()+"</td></tr>","no calls yet");
  rows("ids",Object.entries(s.identities||{}),([k,v])=>"<tr><td>"+esc(k)+"</td><td>"+Object.entries(v).map(([o,n])=>esc(o)+" "+n).join(" · ")+"</td></tr>","no signed-in calls yet");
  rows("rej",s.rejected_tools,x=>"<tr><td>"+esc(x.name)+"</td><td>"+esc(x.toolset)+"</td><td>"+esc(x.held_by)+"</td><td>"+esc(x.reason)+"</td></tr>","none");
 }catch(e){document.getElementById("hub").textContent="status unavailable: "+e}
}
refresh();setInterval(refresh,2000);
</script></body></html>
"""
