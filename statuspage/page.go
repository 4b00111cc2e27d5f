package statuspage

import (
	"fmt"
	"html/template"
	"time"
)

// pageData is what the page template renders.
type pageData struct {
	Status
	Refresh int    // seconds between reloads; 0: none
	Prefix  string // the lock prefix
}

// refreshSeconds rounds d up to whole seconds, for the page's reload.
func refreshSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms":    fmtMillis,
	"plus":  func(a, b int) int { return a + b },
	"clock": func(t time.Time) string { return t.Format("15:04:05") },
	"stamp": func(t time.Time) string { return t.Format(time.RFC3339) },
	"ago": func(t time.Time, now time.Time) string {
		return fmtMillis(now.Sub(t).Milliseconds()) + " ago"
	},
}).Parse(pageHTML))

// fmtMillis writes a count of milliseconds for people: 850ms, 12.3s,
// 4m05s, 2h10m, 3d4h.
func fmtMillis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>{{.Service.Tenant}}/{{.Service.App}} · baton</title>
<style>
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde2ea; --bg:#f6f7f9; --card:#fff; --ok:#17803d; --bad:#b42318; --master:#1d4ed8; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
main { max-width:64rem; margin:0 auto; padding:1rem; }
h1 { font-size:1.35rem; margin:.2rem 0 .8rem; overflow-wrap:anywhere; }
h2 { font-size:1.05rem; margin:0 0 .6rem; }
section { background:var(--card); border:1px solid var(--line); border-radius:.6rem; padding:.9rem 1rem; margin:0 0 1rem; }
.badge { display:inline-block; padding:.1rem .55rem; border-radius:1rem; font-size:.8rem; font-weight:600; color:#fff; background:var(--muted); vertical-align:middle; }
.badge.ok { background:var(--ok); } .badge.bad { background:var(--bad); } .badge.master { background:var(--master); }
.muted { color:var(--muted); } .bad { color:var(--bad); }
code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:.88em; overflow-wrap:anywhere; }
dl { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; margin:0; }
dt { color:var(--muted); } dd { margin:0; overflow-wrap:anywhere; }
table { width:100%; border-collapse:collapse; }
th, td { text-align:left; padding:.4rem .5rem; border-top:1px solid var(--line); vertical-align:top; }
th { font-size:.8rem; color:var(--muted); font-weight:600; border-top:0; }
ul.events { list-style:none; padding:0; margin:0; }
ul.events li { padding:.35rem 0; border-top:1px solid var(--line); }
ul.events li:first-child { border-top:0; }
footer { font-size:.85rem; color:var(--muted); padding:0 .2rem 1rem; }
@media (max-width: 40rem) {
  main { padding:.6rem; }
  table, thead, tbody, tr, th, td { display:block; }
  thead { display:none; }
  tr { border-top:1px solid var(--line); padding:.4rem 0; }
  td { border:0; padding:.15rem 0; }
  td::before { content:attr(data-label) ": "; color:var(--muted); font-size:.8rem; }
  dl { grid-template-columns:1fr; } dt { margin-top:.3rem; }
}
</style>
</head>
<body>
<main>
<h1>{{.Service.Tenant}}/{{.Service.App}}
 {{if .Healthy}}<span class="badge ok" id="health">healthy</span>{{else}}<span class="badge bad" id="health">unhealthy</span>{{end}}</h1>

{{if .Problems}}<section id="problems"><h2 class="bad">Problems</h2><ul>{{range .Problems}}<li>{{.}}</li>{{end}}</ul></section>{{end}}

<section id="master">
<h2>Master</h2>
{{with .Master}}<dl>
<dt>Instance</dt><dd><code id="master-id">{{.ID}}</code></dd>
<dt>Epoch</dt><dd><code id="master-epoch">{{.Epoch}}</code></dd>
<dt>Since</dt><dd>{{if .Since}}{{stamp .Since}} <span class="muted">({{ago .Since $.GeneratedAt}}, seen by this instance)</span>{{else}}<span class="muted">not seen by this instance</span>{{end}}{{if .HeldAtLeastMillis}}<br><span class="muted">master for at least {{ms .HeldAtLeastMillis}}, by its epoch</span>{{end}}</dd>
<dt>Lease left</dt><dd>{{ms .LeaseMillis}}</dd>
</dl>{{else}}<p id="master-id" class="bad">No master: nobody holds the role key{{if not $.Healthy}}, or the store could not be read{{end}}.</p>{{end}}
{{with .Instance.RecoveringUntil}}<p id="recovering" class="bad">The store is recovering: it may have lost leases that their holders still use (it restarted without its data, lost it, or is new to baton), so it grants the role to nobody until {{stamp .}} ({{ms $.Instance.RecoveringMillis}} from now).</p>{{end}}
</section>

<section id="instance">
<h2>This instance</h2>
<dl>
<dt>Instance</dt><dd><code id="self-id">{{.Instance.ID}}</code> <span class="badge{{if eq .Instance.Role "master"}} master{{end}}" id="self-role">{{.Instance.Role}}</span></dd>
<dt>Since</dt><dd>{{if not .Instance.Since.IsZero}}{{stamp .Instance.Since}} <span class="muted">({{ago .Instance.Since .GeneratedAt}})</span>{{else}}<span class="muted">never elected or demoted yet</span>{{end}}</dd>
<dt>Highest epoch seen</dt><dd><code>{{.Instance.Epoch}}</code></dd>
{{if .Instance.LastError}}<dt>Last store error</dt><dd class="bad">{{.Instance.LastError}} <span class="muted">({{ago .Instance.LastErrorAt .GeneratedAt}})</span></dd>{{end}}
</dl>
</section>

<section id="members">
<h2>Members ({{len .Members}}{{if .MembersMore}} of {{plus (len .Members) .MembersMore}}{{end}})</h2>
{{if .MembersError}}<p class="bad">{{.MembersError}}</p>{{end}}
{{if .Members}}<table>
<thead><tr><th>Instance</th><th>Role</th><th>Last heartbeat</th><th>Started</th></tr></thead>
<tbody>{{range .Members}}<tr class="member">
<td data-label="Instance"><code class="member-id">{{.ID}}</code>{{if .Self}} <span class="muted">(this instance)</span>{{end}}</td>
<td data-label="Role">{{if .Master}}<span class="badge master">master</span>{{else}}slave{{end}}</td>
<td data-label="Last heartbeat">{{ms .LastHeartbeatMillis}} ago</td>
<td data-label="Started">{{if .StartedAt.IsZero}}<span class="muted">unknown</span>{{else}}{{stamp .StartedAt}}{{end}}</td>
</tr>{{end}}</tbody>
</table>{{else if not .MembersError}}<p class="muted">No live members.</p>{{end}}
{{if .MembersMore}}<p class="muted" id="members-more">and {{.MembersMore}} more, not listed</p>{{end}}
</section>

<section id="locks">
<h2>Locks held ({{len .Locks}}{{if .LocksMore}} of {{if .LocksPartial}}more than {{end}}{{plus (len .Locks) .LocksMore}}{{end}})</h2>
{{if .LocksError}}<p class="bad">{{.LocksError}}</p>{{end}}
{{if .Locks}}<table>
<thead><tr><th>Lock</th><th>Holder</th><th>Held for</th><th>Lease left</th><th>Waiters</th></tr></thead>
<tbody>{{range .Locks}}<tr class="lock">
<td data-label="Lock"><span class="muted">{{.Kind}}</span> <code>{{.Name}}</code></td>
<td data-label="Holder"><code>{{.Holder}}</code></td>
<td data-label="Held for">{{if .HeldAtLeastMillis}}at least {{ms .HeldAtLeastMillis}}{{else}}<span class="muted">not recorded</span>{{end}}<br><span class="muted">token <code>{{.Token}}</code></span></td>
<td data-label="Lease left">{{ms .LeaseMillis}}</td>
<td data-label="Waiters">{{if .Waiters}}{{len .Waiters}}{{if .WaitersMore}}+{{end}}: {{range $i, $w := .Waiters}}{{if $i}}, {{end}}<code>{{$w}}</code>{{end}}{{if .WaitersMore}}, <span class="muted">and more</span>{{end}}{{else}}<span class="muted">none</span>{{end}}</td>
</tr>{{end}}</tbody>
</table>
<p class="muted">Stores do not record when a lease was granted: "held for" is a lower bound read from the fencing token, which is at least the store's clock in µs at the grant.</p>
{{else if not (or .LocksError .LocksMore)}}<p class="muted">No locks held under <code>{{.Prefix}}</code>{{if .LocksPartial}} among the keys the store looked at{{end}}.</p>{{end}}
{{if .LocksPartial}}<p class="muted" id="locks-more">{{if .LocksMore}}and more than {{.LocksMore}} more, not listed{{else}}There may be more{{end}}: the store looks at a bounded part of its keys per read.</p>
{{else if .LocksMore}}<p class="muted" id="locks-more">and {{.LocksMore}} more, not listed</p>{{end}}
</section>

<section id="transitions">
<h2>Recent transitions</h2>
{{if .Transitions}}<ul class="events">{{range .Transitions}}<li><span class="muted">{{clock .Time}}</span> <strong>{{.Kind}}</strong> <code>{{.Subject}}</code>{{if .Detail}} <span class="muted">{{.Detail}}</span>{{end}}</li>{{end}}</ul>{{else}}<p class="muted">None seen by this process.</p>{{end}}
</section>

<section id="jobs">
<h2>Recent skipped jobs</h2>
{{if .Jobs}}<ul class="events">{{range .Jobs}}<li><span class="muted">{{clock .Time}}</span> <strong>{{.Kind}}</strong> <code>{{.Subject}}</code>{{if .Detail}} <span class="muted">{{.Detail}}</span>{{end}}</li>{{end}}</ul>{{else}}<p class="muted">None seen by this process.</p>{{end}}
</section>

<footer>Read at {{stamp .GeneratedAt}}{{if .Refresh}}; reloads every {{.Refresh}} s{{end}}. <a href="status">status (JSON)</a> · <a href="healthz">healthz</a></footer>
</main>
</body>
</html>
`
