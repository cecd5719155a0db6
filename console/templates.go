package console

// pageTemplates are the console's pages: plain HTML forms and links, no script, one inline
// style sheet (the pages must work with JavaScript off and load nothing from elsewhere).
const pageTemplates = `
{{define "head"}}<!doctype html>
<html lang="{{if eq .Lang "zh"}}zh-Hans{{else}}en{{end}}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.T "title"}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC","PingFang SC",sans-serif;margin:0;color:#1d2330;background:#f5f6f8;font-size:14px}
header{background:#1f3a5f;color:#fff;padding:10px 24px;display:flex;justify-content:space-between;align-items:center;flex-wrap:wrap;gap:8px}
header a{color:#fff;text-decoration:none;font-weight:600;font-size:16px}
header nav{display:flex;gap:8px;align-items:center}
main{padding:16px 24px;max-width:1280px;margin:0 auto}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:20px 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:12px}
.card{background:#fff;border:1px solid #d8dde6;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:18px}.card small{color:#5a6475}
.card.total{background:#eef3fa}
a.card{text-decoration:none;color:inherit}
details#summaries{margin:8px 0}details#summaries table{margin-top:6px;max-width:720px}
form.filters{background:#fff;border:1px solid #d8dde6;border-radius:6px;padding:10px;display:flex;flex-wrap:wrap;gap:10px;align-items:flex-end}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#5a6475;gap:2px}
fieldset{border:1px solid #d8dde6;border-radius:4px;padding:4px 8px;font-size:12px}
input,select,textarea,button{font:inherit}
button{background:#1f5fa8;color:#fff;border:0;border-radius:4px;padding:6px 14px;cursor:pointer}
button.secondary{background:#5a6475}button.danger{background:#a83232}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d8dde6;table-layout:auto}
th,td{padding:6px 8px;border-bottom:1px solid #e4e7ec;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600;font-size:12px;color:#3b4454}
td.num,th.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.nowrap,td .nowrap{white-space:nowrap}td.note{white-space:normal;min-width:14em}#audit th{word-break:keep-all}
.status{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;white-space:nowrap;background:#e4e7ec}
.refund-ABNORMAL{color:#a83232;font-weight:600}
.status-overdue{background:#b3261e;color:#fff}.card.overdue b{color:#b3261e}
.status-OPEN{background:#fde2e1}.status-ACKNOWLEDGED{background:#fff1c2}.status-PENDING_APPROVAL{background:#dfe9fb}.status-RESOLVED{background:#dcf2e0}
.flash{background:#dcf2e0;border:1px solid #9ccfa6;padding:8px 12px;border-radius:4px;margin-bottom:10px}
.error{background:#fde2e1;border:1px solid #e6a3a0;padding:8px 12px;border-radius:4px;margin-bottom:10px}
.pager{display:flex;gap:12px;align-items:center;margin:10px 0}
.side{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.side table td:first-child{color:#5a6475;width:40%}
.diff{background:#fff4d6}
.actions{display:flex;flex-wrap:wrap;gap:12px}
.actions form{background:#fff;border:1px solid #d8dde6;border-radius:6px;padding:10px;display:flex;flex-direction:column;gap:6px;min-width:240px}
pre{background:#fff;border:1px solid #d8dde6;padding:8px;overflow:auto;font-size:12px}
.muted{color:#5a6475;font-size:12px}
.provider{display:block;white-space:nowrap}h1 .provider{display:inline;font-weight:normal;font-size:14px}
fieldset.bulk{display:flex;flex-wrap:wrap;gap:10px;align-items:end;margin-top:8px;background:#fff;border:1px solid #d8dde6;border-radius:6px}
fieldset.bulk label{display:flex;flex-direction:column;gap:2px;font-size:12px;color:#5a6475}
#resolution-hints{margin:0;max-width:320px}#resolution-hints dt{font-weight:600;color:#1f2937}#resolution-hints dd{margin:0 0 4px 0}
.reason{background:#fff;border-left:4px solid #dfe9fb;padding:6px 10px}
.wide{overflow-x:auto}#statements th,#statements td{padding:6px 4px}#statements thead th.num,#statements .provider{white-space:normal}#statements{font-size:12px}
</style></head><body>
<header><nav id="nav"><a href="/review/">{{.T "title"}}</a> · <a href="/review/" id="nav-findings">{{.T "findings_list"}}</a> · <a href="/review/approvals" id="nav-approvals">{{.T "approvals"}}</a> · <a href="/review/statements" id="nav-statements">{{.T "statements"}}</a></nav>
<span>{{.T "signed_in_as"}} <b id="viewer">{{.Viewer.Email}}</b> ({{.RoleLabel}}) · {{.T "times_in"}} {{.Zone}}</span></header>
<main>
{{if .Flash}}<div class="flash" role="status">{{.Flash}}</div>{{end}}
{{if .Error}}<div class="error" role="alert" id="error">{{.Error}}</div>{{end}}
{{end}}

{{define "foot"}}</main></body></html>{{end}}

{{define "status"}}<span class="status status-{{.S}}">{{.P.N .S}}</span>{{end}}

{{define "approvals"}}{{template "head" .}}
<h1>{{.T "approvals"}}: {{len .Others}} + {{len .Mine}}</h1>
{{if .Viewer.CanApprove}}<h2>{{.T "for_you"}}</h2>{{else}}<h2>{{.T "awaiting_approver"}}</h2>
<p class="reason">{{.T "why_not_approver"}}</p>{{end}}
{{template "proposals" (proposals . .Others "for-you")}}
<h2>{{.T "your_proposals"}}</h2>
{{if and .Mine (not .SecondApprover)}}<p class="reason" id="no-second-approver">{{.T "why_no_second_approver"}}</p>{{end}}
{{template "proposals" (proposals . .Mine "mine")}}
{{template "foot"}}{{end}}

{{define "proposals"}}{{if .Findings}}<table id="{{.ID}}"><thead><tr><th>#</th><th>{{.P.T "kind"}}</th><th class="num">{{.P.T "at_stake"}}</th><th>{{.P.T "proposed_by"}}</th>
<th>{{.P.T "proposed_resolution"}}</th><th>{{.P.T "note"}}</th><th>{{.P.T "waiting"}}</th></tr></thead><tbody>
{{range .Findings}}<tr><td><a href="/review/findings/{{.ID}}" class="open">{{.ID}}</a></td><td>{{$.P.N .Kind}}</td><td class="num">{{$.P.Yuan .AtStakeMinor}}</td>
<td class="who">{{.ProposedBy}}</td><td>{{$.P.N .Resolution}}</td><td>{{.Note}}</td><td class="nowrap">{{$.P.Waiting .ProposedAt}}</td></tr>
{{end}}</tbody></table>{{else}}<p class="muted">{{.P.T "no_approvals"}}</p>{{end}}{{end}}

{{define "bulk"}}{{template "head" .}}
<p><a href="{{.Back}}">← {{.T "back"}}</a></p>
{{if .Confirm}}<h1>{{.T (print .Req.Action)}}: {{.Total}}</h1>
<p class="reason" id="bulk-count">{{.T "bulk_confirm"}}</p>
<p>{{if .Req.Resolution}}{{.T "resolution"}}: <b>{{.N .Req.Resolution}}</b> · {{end}}{{.T "note"}}: {{if .Req.Note}}{{.Req.Note}}{{else}}—{{end}}</p>
<form method="post" action="/review/bulk" id="bulk-confirm">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="filter" value="{{.Req.Filter}}">
<input type="hidden" name="action" value="{{.Req.Action}}"><input type="hidden" name="resolution" value="{{.Req.Resolution}}"><input type="hidden" name="note" value="{{.Req.Note}}">
{{range .Req.Items}}<input type="hidden" name="sel" value="{{$.Sel .}}">{{end}}
<button type="submit" name="scope" value="confirmed" id="confirm">{{.T "confirm"}} ({{.Total}})</button></form>
{{else if or .Moved .Refused}}<h1>{{.T "bulk_done"}}: {{len .Moved}} · {{.T "bulk_refused"}}: {{len .Refused}}</h1>
{{if .Refused}}<table id="refused"><thead><tr><th>#</th><th>{{.T "reason"}}</th></tr></thead><tbody>
{{range .Refused}}<tr><td><a href="/review/findings/{{.ID}}">{{.ID}}</a></td><td>{{.Reason}}</td></tr>{{end}}</tbody></table>{{end}}
{{end}}
{{template "foot"}}{{end}}

{{define "lines"}}{{template "head" .}}
<p><a href="/review/statements?from={{.Date}}&amp;to={{.Date}}">← {{.T "statements"}}</a></p>
<h1>{{.T "bill_lines"}}: {{.Date}} · {{.N .Account.Platform}} {{.Account.MerchantID}}{{with .Via .Account.Platform .Account.MerchantID}} <small class="muted provider">{{.}}</small>{{end}}</h1>
<p class="pager">{{range .Results}}{{if eq . $.Result}}<b>{{if .}}{{$.T (print "line." .)}}{{else}}{{$.T "any"}}{{end}}</b>{{else}}<a href="{{$.Link .}}">{{if .}}{{$.T (print "line." .)}}{{else}}{{$.T "any"}}{{end}}</a>{{end}} {{end}}</p>
<p class="reason">{{.T "lines_note"}}</p>
{{if .Lines}}<table id="lines"><thead><tr><th class="num">{{.T "line_no"}}</th><th>{{.T "line_kind"}}</th><th>{{.T "order_no"}}</th><th>{{.T "platform_trade_no"}}</th><th>{{.T "refund_no"}}</th><th class="num">{{.T "amount"}}</th><th>{{.T "line_result"}}</th><th>{{.T "finding"}}</th></tr></thead><tbody>
{{range .Lines}}<tr data-line="{{.No}}"><td class="num">{{.No}}</td><td>{{$.T (print "line_kind." .Kind)}}</td><td>{{.OutTradeNo}}</td><td>{{.PlatformTradeNo}}</td><td>{{.RefundNo}}</td><td class="num">{{$.Yuan .AmountMinor}}</td>
<td>{{$.T (print "line." .Result)}}</td><td>{{with .MismatchID}}<a href="/review/findings/{{.}}">#{{.}}</a> {{end}}{{if .MismatchKind}}{{$.N .MismatchKind}}{{end}}</td></tr>{{end}}
</tbody></table>{{else}}<p>{{.T "no_lines"}}</p>{{end}}
{{template "foot"}}{{end}}

{{define "list"}}{{template "head" .}}
<h1>{{.T "findings_list"}}</h1>
<div class="cards" id="totals">
<div class="card total"><small>{{.T "total"}}</small><b>{{.Result.Total}}</b><small>{{.T "at_stake"}} {{.Yuan .AtStake}}</small></div>
<a class="card overdue" id="overdue-card" href="{{.OverdueLink}}"><small>{{.T "overdue"}}</small><b>{{.Result.Overdue}}</b><small>{{.T "sla"}} {{.SLA}}</small></a>
{{range .Result.ByKind}}<div class="card" data-kind="{{.Kind}}"><small>{{$.N .Kind}}</small><b>{{.Count}}</b><small>{{$.T "at_stake"}} {{$.Yuan .AtStakeMinor}}</small></div>{{end}}
</div>
{{if .Result.ByAccount}}<details id="summaries"><summary>{{.T "by_account"}}</summary>
<table id="by-account"><thead><tr><th>{{.T "platform"}}</th><th>{{.T "merchant"}}</th><th class="num">{{.T "count"}}</th><th class="num">{{.T "at_stake"}}</th><th class="num">{{.T "overdue"}}</th></tr></thead><tbody>
{{range .Result.ByPlatform}}<tr class="platform-total"><td><b>{{$.N .Platform}}</b></td><td>{{$.T "all_accounts"}}</td><td class="num">{{.Count}}</td><td class="num">{{$.Yuan .AtStakeMinor}}</td><td class="num">{{.Overdue}}</td></tr>{{end}}
{{range .Result.ByAccount}}<tr data-account="{{.Platform}}:{{.MerchantID}}"><td>{{$.N .Platform}}</td><td><a href="{{$.AccountLink .}}">{{.MerchantID}}</a>{{with $.Via .Platform .MerchantID}}<small class="muted provider">{{.}}</small>{{end}}</td><td class="num">{{.Count}}</td><td class="num">{{$.Yuan .AtStakeMinor}}</td><td class="num">{{.Overdue}}</td></tr>{{end}}
</tbody></table></details>{{end}}
<form class="filters" method="get" action="/review/" id="filters">
<label class="search">{{.T "search"}}<input type="search" name="q" value="{{.Q.Query}}" size="30" maxlength="64" placeholder="{{.T "search_hint"}}"></label>
<fieldset><legend>{{.T "review_status"}}</legend>
{{range .Statuses}}<label style="flex-direction:row;gap:4px"><input type="checkbox" name="status" value="{{.}}"{{if $.Q.HasStatus .}} checked{{end}}>{{$.N .}}</label>{{end}}
</fieldset>
<label style="flex-direction:row;gap:4px;align-self:end"><input type="checkbox" name="overdue" value="1"{{if .Q.Overdue}} checked{{end}}>{{.T "overdue_only"}}</label>
<label>{{.T "kind"}}<select name="kind"><option value="">{{.T "any"}}</option>
{{range .Kinds}}<option value="{{.}}"{{if eq (print .) $.Q.Kind}} selected{{end}}>{{$.N .}}</option>{{end}}</select></label>
<label>{{.T "platform"}}<select name="platform"><option value="">{{.T "any"}}</option>
{{range .Platforms}}<option value="{{.}}"{{if eq (print .) $.Q.Platform}} selected{{end}}>{{$.N .}}</option>{{end}}</select></label>
<label>{{.T "merchant"}}<input name="merchant" value="{{.Q.Merchant}}" size="16"></label>
{{if .Providers}}<label>{{.T "provider"}}<select name="provider"><option value="">{{.T "any"}}</option>
{{range .Providers}}<option value="{{.ID}}"{{if eq .ID $.Q.Provider}} selected{{end}}>{{$.ProviderName .}}</option>{{end}}</select></label>{{end}}
<label>{{.T "from"}}<input type="date" name="from" value="{{.Q.From}}"></label>
<label>{{.T "to"}}<input type="date" name="to" value="{{.Q.To}}"></label>
<label>{{.T "min"}}<input name="min" value="{{.Q.Min}}" size="8" inputmode="decimal"></label>
<label>{{.T "max"}}<input name="max" value="{{.Q.Max}}" size="8" inputmode="decimal"></label>
<label>{{.T "sort"}}<select name="sort">
{{range .Sorts}}<option value="{{.}}"{{if eq (print .) $.Q.Sort}} selected{{end}}>{{$.T (print .)}}</option>{{end}}</select></label>
<label>&nbsp;<select name="dir"><option value="desc">{{.T "order_desc"}}</option><option value="asc"{{if eq .Q.Dir "asc"}} selected{{end}}>{{.T "order_asc"}}</option></select></label>
<button type="submit" id="apply">{{.T "filter"}}</button> <a href="/review/">{{.T "clear"}}</a>
</form>
<h2>{{.T "findings_list"}}: {{.Result.Total}}</h2>
{{if .Result.Findings}}
<form method="post" action="/review/bulk" id="bulk">
<table id="findings"><thead><tr><th>✓</th><th>#</th><th>{{.T "kind"}}</th><th>{{.T "review_status"}}</th><th>{{.T "age"}}</th><th>{{.T "platform"}}</th><th>{{.T "merchant"}}</th>
<th>{{.T "order_no"}}</th><th class="num">{{.T "at_stake"}}</th><th>{{.T "last_seen"}}</th><th class="num">{{.T "seen_count"}}</th></tr></thead><tbody>
{{range .Result.Findings}}<tr><td><input type="checkbox" name="sel" value="{{.ID}}.{{.EvidenceVersion}}" aria-label="{{.ID}}"></td><td><a href="/review/findings/{{.ID}}" class="open">{{.ID}}</a></td><td class="kind">{{$.N .Kind}}</td>
<td>{{template "status" (statusOf $ .ReviewStatus)}}</td><td class="nowrap age">{{$.Age .FirstSeenAt}}{{if .Overdue $.OverdueAt}} <span class="status status-overdue">{{$.T "overdue"}}</span>{{end}}</td><td class="nowrap">{{$.N .Platform}}</td><td class="merchant">{{.MerchantID}}{{with $.Via .Platform .MerchantID}}<small class="muted provider">{{.}}</small>{{end}}</td>
<td><a href="/review/findings/{{.ID}}">{{.OutTradeNo}}</a>{{if .OutRefundNo}}<br><span class="muted">{{$.T "refund"}} {{.OutRefundNo}}</span>{{end}}</td><td class="num at-stake">{{$.Yuan .AtStakeMinor}}</td>
<td class="nowrap">{{$.Time .LastSeenAt}}</td><td class="num">{{.SeenCount}}</td></tr>
{{end}}</tbody></table>
<div class="pager">{{if .Prev}}<a href="{{.Prev}}" rel="prev">{{.T "prev"}}</a>{{end}}
<span>{{.T "page"}} {{.Page}} / {{.Last}}</span>{{if .Next}}<a href="{{.Next}}" rel="next">{{.T "next"}}</a>{{end}}</div>
<fieldset class="bulk"><legend>{{.T "bulk"}}</legend>
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="filter" value="{{.FilterQuery}}">
<label>{{.T "bulk_action"}}<select name="action" id="bulk-action"><option value="">{{.T "choose"}}</option><option value="acknowledge">{{.T "acknowledge"}}</option><option value="resolve">{{.T "resolve"}}</option>
{{if .Viewer.CanApprove}}<option value="approve">{{.T "approve"}}</option><option value="reject">{{.T "reject"}}</option>{{end}}</select></label>
<label>{{.T "resolution"}}<select name="resolution" id="bulk-resolution"><option value="">{{.T "choose"}}</option>{{range .Resolutions}}<option value="{{.}}">{{$.N .}}</option>{{end}}</select></label>
<label>{{.T "note"}}<input name="note" size="30" id="bulk-note"></label>
<button type="submit" name="scope" value="selected" id="bulk-selected">{{.T "bulk_selected"}}</button>
<button type="submit" name="scope" value="all" id="bulk-all">{{.T "bulk_all"}} ({{.Result.Total}})</button>
</fieldset></form>
{{else}}<p>{{.T "no_findings"}}</p>{{end}}
<h2>{{.T "reports"}}</h2>
<form class="filters" method="get" action="/review/report" id="report">
<label>{{.T "from"}}<input type="date" name="from" value="{{.ReportFrom}}" required></label>
<label>{{.T "to"}}<input type="date" name="to" value="{{.ReportTo}}" required></label>
<label>&nbsp;<select name="format"><option value="html">HTML</option><option value="xlsx">Excel (XLSX)</option><option value="csv">CSV</option></select></label>
<button type="submit">{{.T "download"}}</button>
</form>
{{template "foot"}}{{end}}

{{define "finding"}}{{template "head" .}}{{$f := .D.Finding}}
<p><a href="/review/">← {{.T "back"}}</a></p>
<h1>{{.T "finding"}} #{{$f.ID}}: {{.N $f.Kind}} {{template "status" (statusOf $ $f.ReviewStatus)}}</h1>
<div class="cards"><div class="card"><small>{{.T "at_stake"}}</small><b>{{.Yuan .AtStake}}</b></div>
<div class="card"><small>{{.T "evidence_version"}}</small><b id="version">{{$f.EvidenceVersion}}</b></div>
<div class="card" id="finding-account"><small>{{.T "platform"}}</small><b>{{.N $f.Platform}}</b><small>{{$f.MerchantID}}</small>{{with .Via $f.Platform $f.MerchantID}}<small class="provider">{{.}}</small>{{end}}</div>
{{if $f.OutRefundNo}}<div class="card" id="finding-refund"><small>{{.T "refund"}}</small><b>{{$f.OutRefundNo}}</b><small>{{with .Refund}}{{$.N .Status}} · {{$.Yuan .AmountMinor}}{{else}}{{$.T "refund_not_ours"}}{{end}}</small></div>{{end}}
{{if $f.Resolution}}<div class="card"><small>{{.T "resolution"}}</small><b>{{.N $f.Resolution}}</b>{{if $f.ProposedBy}}<small>{{.T "proposed_by"}} {{$f.ProposedBy}}</small>{{else if $f.ResolvedBy}}<small>{{.T "resolved_by"}} {{$f.ResolvedBy}}</small>{{end}}{{if $f.ApprovedBy}}<small> · {{.T "approved_by"}} {{$f.ApprovedBy}}</small>{{end}}</div>{{end}}</div>
<h2>{{.T "evidence"}}</h2>
<div class="side" id="evidence">
<table><thead><tr><th colspan="2">{{.T "ours"}}</th></tr></thead><tbody>
<tr><td>{{.T "order_no"}}</td><td>{{$f.OutTradeNo}}</td></tr>
{{if $f.OutRefundNo}}<tr><td>{{.T "refund_no"}}</td><td>{{$f.OutRefundNo}}</td></tr>{{end}}
<tr{{if ne (yp $f.LocalAmountMinor) (yp $f.PlatformAmountMinor)}} class="diff"{{end}}><td>{{.T "amount"}}</td><td class="num">{{.YuanP $f.LocalAmountMinor}}</td></tr>
<tr><td>{{.T "order_status"}}</td><td>{{if $f.LocalStatus}}{{.N $f.LocalStatus}}{{else}}—{{end}}</td></tr>
{{with .D.Order}}<tr><td>{{$.T "currency"}}</td><td>{{.Currency}}</td></tr>
<tr><td>{{$.T "created"}}</td><td>{{$.Time .CreatedAt}}</td></tr><tr><td>{{$.T "paid_at"}}</td><td>{{$.TimeP .PaidAt}}</td></tr>
<tr><td>{{$.T "local_order"}}</td><td>{{$.N .Status}} · {{$.Yuan .AmountMinor}}</td></tr>
{{if or .RefundedMinor $.D.Refunds}}<tr id="refunded"><td>{{$.T "refunded_minor"}}</td><td>{{$.Yuan .RefundedMinor}}{{with .PaidAmountMinor}} / {{$.Yuan .}}{{end}}</td></tr>{{end}}{{end}}
</tbody></table>
<table><thead><tr><th colspan="2">{{.T "theirs"}}</th></tr></thead><tbody>
<tr><td>{{.T "platform_trade_no"}}</td><td>{{if $f.PlatformTradeNo}}{{$f.PlatformTradeNo}}{{else}}—{{end}}</td></tr>
<tr{{if ne (yp $f.LocalAmountMinor) (yp $f.PlatformAmountMinor)}} class="diff"{{end}}><td>{{.T "amount"}}</td><td class="num">{{.YuanP $f.PlatformAmountMinor}}</td></tr>
<tr><td>{{.T "order_status"}}</td><td>{{if $f.PlatformStatus}}{{$f.PlatformStatus}}{{else}}—{{end}}</td></tr>
<tr><td>{{.T "merchant"}}</td><td class="merchant">{{$f.MerchantID}}{{with .Via $f.Platform $f.MerchantID}}<small class="muted provider">{{.}}</small>{{end}}</td></tr>
</tbody></table></div>
<h2>{{.T "sighting_history"}}</h2>
<table id="sightings"><thead><tr><th>{{.T "first_seen"}}</th><th>{{.T "last_seen"}}</th><th class="num">{{.T "seen_count"}}</th><th class="num">{{.T "evidence_version"}}</th></tr></thead>
<tbody><tr><td>{{.Time $f.FirstSeenAt}}</td><td>{{.Time $f.LastSeenAt}}</td><td class="num">{{$f.SeenCount}}</td><td class="num">{{$f.EvidenceVersion}}</td></tr></tbody></table>
<p class="muted">{{.T "sightings_note"}}</p>
{{if .Detail}}<details><summary>{{.T "detail"}}</summary><pre>{{.Detail}}</pre></details>{{end}}
<h2>{{.T "events"}}</h2>
{{if .D.Order}}{{if .D.Events}}<table id="events"><thead><tr><th>{{.T "when"}}</th><th>{{.T "event"}}</th><th>{{.T "source"}}</th><th class="num">{{.T "amount"}}</th><th>{{.T "refund"}}</th><th>{{.T "platform_trade_no"}}</th></tr></thead><tbody>
{{range .D.Events}}<tr{{if .OutRefundNo}} data-refund-event="{{.OutRefundNo}}"{{end}}><td class="nowrap">{{$.Time .CreatedAt}}</td><td>{{$.N .EventType}}</td><td>{{$.N .Source}}</td><td class="num">{{$.YuanP .AmountMinor}}</td><td>{{if .OutRefundNo}}{{.OutRefundNo}}{{else}}—{{end}}</td><td>{{.PlatformTradeNo}}</td></tr>{{end}}
</tbody></table>{{else}}<p>{{.T "no_events"}}</p>{{end}}
{{template "refunds" .}}{{else}}<p>{{.T "no_order"}}</p>{{end}}
{{if .D.Lines}}<h2>{{.T "bill_lines"}}</h2><table id="finding-lines"><thead><tr><th>{{.T "bill_date"}}</th><th class="num">{{.T "line_no"}}</th><th>{{.T "line_kind"}}</th><th class="num">{{.T "amount"}}</th><th>{{.T "line_result"}}</th></tr></thead><tbody>
{{range .D.Lines}}<tr><td><a href="{{$.LineLink .}}">{{.BillDate}}</a></td><td class="num">{{.No}}</td><td>{{$.T (print "line_kind." .Kind)}}</td><td class="num">{{$.Yuan .AmountMinor}}</td><td>{{$.T (print "line." .Result)}}</td></tr>{{end}}
</tbody></table>{{end}}
<h2>{{.T "audit"}}</h2>
{{if .D.Audit}}<div class="wide"><table id="audit"><thead><tr><th>{{.T "when"}}</th><th>{{.T "who"}}</th><th>{{.T "action"}}</th><th>{{.T "from_status"}}</th><th>{{.T "to_status"}}</th><th>{{.T "resolution"}}</th><th class="num">{{.T "version_seen"}}</th><th>{{.T "note"}}</th></tr></thead><tbody>
{{range .D.Audit}}<tr data-action="{{.Action}}"><td class="nowrap">{{$.Time .CreatedAt}}</td><td class="who"><span class="nowrap">{{.Actor}}</span>{{if .OSUser}} <span class="muted nowrap">({{.OSUser}})</span>{{end}}</td><td class="nowrap">{{$.A .Action}}</td>
<td class="nowrap">{{if .FromStatus}}{{$.N .FromStatus}}{{end}}</td><td class="nowrap">{{if .ToStatus}}{{$.N .ToStatus}}{{end}}</td><td class="nowrap">{{if .Resolution}}{{$.N .Resolution}}{{end}}</td>
<td class="num">{{with .EvidenceVersion}}{{.}}{{end}}</td><td class="note">{{.Note}}</td></tr>{{end}}
</tbody></table></div>{{else}}<p>{{.T "no_audit"}}</p>{{end}}
<h2>{{.T "actions"}}</h2>
{{range .Reasons}}<p class="reason">{{$.T .}}</p>{{end}}
<div class="actions">
{{if .CanAck}}<form method="post" action="/review/findings/{{$f.ID}}/acknowledge" id="form-acknowledge">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="version" value="{{$f.EvidenceVersion}}">
<label>{{.T "note"}}<br><input name="note" size="28"></label><button type="submit">{{.T "acknowledge"}}</button></form>{{end}}
{{if .CanResolve}}<form method="post" action="/review/findings/{{$f.ID}}/resolve" id="form-resolve">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="version" value="{{$f.EvidenceVersion}}">
<label>{{.T "resolution"}}<br><select name="resolution" id="resolution" required><option value="" selected>{{.T "choose"}}</option>{{range .Resolutions}}<option value="{{.}}">{{$.N .}}</option>{{end}}</select></label>
<label>{{.T "note"}}<br><input name="note" size="28" id="resolve-note"></label>
<dl class="muted" id="resolution-hints">{{range .Resolutions}}<dt>{{$.N .}}</dt><dd>{{$.T (print "does." .)}}</dd>{{end}}</dl><button type="submit" id="resolve">{{.T "resolve"}}</button></form>{{end}}
{{if .CanApprove}}<form method="post" action="/review/findings/{{$f.ID}}/approve" id="form-approve">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="version" value="{{$f.EvidenceVersion}}">
<span>{{.T "proposed_by"}} {{$f.ProposedBy}}: <b>{{.N $f.Resolution}}</b></span>
<label>{{.T "note"}}<br><input name="note" size="28"></label><button type="submit" id="approve">{{.T "approve"}}</button></form>
<form method="post" action="/review/findings/{{$f.ID}}/reject" id="form-reject">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="version" value="{{$f.EvidenceVersion}}">
<label>{{.T "reject_note"}}<br><input name="note" size="28" required></label><button type="submit" class="danger">{{.T "reject"}}</button></form>{{end}}
{{if .CanWithdraw}}<form method="post" action="/review/findings/{{$f.ID}}/withdraw" id="form-withdraw">
<input type="hidden" name="csrf" value="{{.Viewer.CSRF}}"><input type="hidden" name="version" value="{{$f.EvidenceVersion}}">
<span>{{.T "withdraw_hint"}}</span>
<label>{{.T "note"}}<br><input name="note" size="28"></label><button type="submit" id="withdraw">{{.T "withdraw"}}</button></form>{{end}}
{{if not (or .CanAck .CanResolve .CanApprove .CanWithdraw .Reasons)}}<p>{{.T "no_actions"}}</p>{{end}}
</div>
{{template "foot"}}{{end}}

{{define "refunds"}}<h2>{{.T "order_refunds"}}</h2>
{{if .D.Refunds}}<table id="refunds"><thead><tr><th>{{.T "refund_no"}}</th><th>{{.T "platform_refund_no"}}</th><th class="num">{{.T "amount"}}</th><th>{{.T "order_status"}}</th><th>{{.T "succeeded_at"}}</th><th>{{.T "created"}}</th></tr></thead><tbody>
{{range .D.Refunds}}<tr data-refund="{{.OutRefundNo}}"{{if eq .OutRefundNo $.D.Finding.OutRefundNo}} class="diff"{{end}}><td>{{.OutRefundNo}}</td><td>{{if .PlatformRefundNo}}{{.PlatformRefundNo}}{{else}}—{{end}}</td><td class="num">{{$.Yuan .AmountMinor}}</td>
<td><span class="refund refund-{{.Status}}">{{$.N .Status}}</span></td><td class="nowrap">{{$.TimeP .SucceededAt}}</td><td class="nowrap">{{$.Time .CreatedAt}}</td></tr>{{end}}
</tbody></table>{{else}}<p>{{.T "no_refunds"}}</p>{{end}}{{end}}

{{define "statements"}}{{template "head" .}}
<h1>{{.T "report.statements"}}</h1>
<form class="filters" method="get" action="/review/statements" id="statement-period">
<label>{{.T "from"}}<input type="date" name="from" value="{{.From}}" required></label>
<label>{{.T "to"}}<input type="date" name="to" value="{{.To}}" required></label>
<button type="submit">{{.T "filter"}}</button>
</form>
<p class="muted">{{.T "report.amounts"}} {{.T "statements_note"}}</p>
{{if .Days}}<div class="wide"><table id="statements"><thead><tr><th>{{.T "bill_date"}}</th><th>{{.T "platform"}}</th><th>{{.T "merchant_id"}}</th>
{{range .Figures}}<th class="num">{{$.T .Key}}</th>{{end}}</tr></thead><tbody>
{{range $d := .Days}}<tr data-day="{{.BillDate}}" data-account="{{.Platform}}:{{.MerchantID}}"><td class="nowrap">{{.BillDate}}</td><td class="nowrap">{{$.N .Platform}}</td><td class="nowrap">{{.MerchantID}}{{with $.Via .Platform .MerchantID}}<small class="muted provider">{{.}}</small>{{end}}</td>
{{range $.Figures}}<td class="num">{{with $.FigureLink . $d}}<a href="{{.}}">{{end}}{{$.Figure . $d.StatementFigures}}{{if $.FigureLink . $d}}</a>{{end}}{{with $.Exact . $d.StatementFigures}}<br><small class="muted exact">{{.}}</small>{{end}}</td>{{end}}</tr>
{{end}}</tbody><tfoot><tr id="statements-total"><th colspan="3">{{$.T "TOTAL"}}</th>
{{range $.Figures}}<th class="num">{{$.Figure . $.Total}}{{with $.Exact . $.Total}}<br><small class="muted exact">{{.}}</small>{{end}}</th>{{end}}</tr></tfoot></table></div>
{{else}}<p id="no-statements">{{.T "report.statements.empty"}}</p>{{end}}
{{if .Missing}}<h2 id="not-reconciled">{{.T "not_reconciled"}}: {{len .Missing}}</h2>
<p class="reason">{{.T "not_reconciled_note"}}</p>
<table id="missing"><thead><tr><th>{{.T "bill_date"}}</th><th>{{.T "platform"}}</th><th>{{.T "merchant_id"}}</th></tr></thead><tbody>
{{range .Missing}}<tr><td>{{.Date}}</td><td>{{$.N .Account.Platform}}</td><td>{{.Account.MerchantID}}{{with $.Via .Account.Platform .Account.MerchantID}}<small class="muted provider">{{.}}</small>{{end}}</td></tr>{{end}}</tbody></table>{{end}}
{{template "foot"}}{{end}}

{{define "error"}}{{template "head" .}}<h1>{{.Message}}</h1><p><a href="/review/">← {{.T "back"}}</a></p>{{template "foot"}}{{end}}
`
