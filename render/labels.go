package render

import (
	"fmt"
	"strings"
)

// Lang is the language of the labels people read (the HTML and XLSX reports, and the review
// console). CSV and JSON keep the column names: programs read those.
type Lang string

const (
	LangEN Lang = "en"
	LangZH Lang = "zh" // Simplified Chinese
)

// Langs lists the label languages.
var Langs = []Lang{LangEN, LangZH}

// ParseLang accepts en, zh and their usual tags (en-US, zh-CN, zh-Hans); "" is English.
func ParseLang(s string) (Lang, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch {
	case v == "" || v == "en" || strings.HasPrefix(v, "en-") || strings.HasPrefix(v, "en_"):
		return LangEN, nil
	case v == "zh" || v == "zh-cn" || v == "zh_cn" || v == "zh-hans" || strings.HasPrefix(v, "zh-hans-") || v == "zh-sg":
		return LangZH, nil
	}
	return "", fmt.Errorf("unknown language %q (want en or zh)", s)
}

// HTMLTag is the page's lang attribute.
func (l Lang) HTMLTag() string {
	if l == LangZH {
		return "zh-Hans"
	}
	return "en"
}

// Label is the text people read for key (a column, a finding kind, a review status, a
// heading) in lang. An unknown key falls back to English, then to the key itself, so a new
// column shows up named rather than blank.
func Label(lang Lang, key string) string {
	l, ok := labels[key]
	if !ok {
		return key
	}
	if lang == LangZH && l.zh != "" {
		return l.zh
	}
	return l.en
}

// HasLabel says whether the table names key (in both languages: a test holds every entry
// whole).
func HasLabel(key string) bool {
	_, ok := labels[key]
	return ok
}

type label struct{ en, zh string }

// labels is the label table (data, not logic).
var labels = map[string]label{
	// Columns.
	"id":                {"No.", "编号"},
	"kind":              {"Kind of finding", "差异类型"},
	"platform":          {"Platform", "支付平台"},
	"merchant_id":       {"Merchant account", "商户号"},
	"out_trade_no":      {"Our order no.", "商户订单号"},
	"platform_trade_no": {"Platform trade no.", "平台交易号"},
	"out_refund_no":     {"Refund no.", "退款单号"},
	"local_amount":      {"Our amount", "我方金额"},
	"platform_amount":   {"Platform amount", "平台金额"},
	"at_stake":          {"Amount at stake", "涉及金额"},
	"local_status":      {"Our status", "我方状态"},
	"platform_status":   {"Platform status", "平台状态"},
	"seen_count":        {"Times seen", "发现次数"},
	"first_seen_at":     {"First seen", "首次发现"},
	"last_seen_at":      {"Last seen", "最近发现"},
	"review_status":     {"Review status", "复核状态"},
	"resolution":        {"Resolution", "处理结果"},
	"resolved_by":       {"Resolved by", "处理人"},
	"resolved_at":       {"Resolved at", "处理时间"},
	"approved_by":       {"Approved by", "审批人"},
	"note":              {"Note", "备注"},
	"order_id":          {"Order", "订单"},
	"evidence_version":  {"Evidence version", "证据版本"},
	"findings":          {"Findings", "差异数"},
	"sightings":         {"Sightings", "发现次数"},
	"mode":              {"Mode", "方式"},
	"status":            {"Status", "状态"},
	"shard":             {"Shard", "分片"},
	"dry_run":           {"Dry run", "演练"},
	"started_at":        {"Started", "开始时间"},
	"finished_at":       {"Finished", "结束时间"},
	"window_from":       {"Window from", "区间起"},
	"window_to":         {"Window to", "区间止"},
	"scanned":           {"Checked", "检查数"},
	"repaired":          {"Repaired", "已补单"},
	"closed":            {"Closed", "已关单"},
	"unchanged":         {"Already right", "无需处理"},
	"still_pending":     {"Still pending", "仍待支付"},
	"mismatches":        {"Findings", "差异"},
	"claimed_elsewhere": {"Held by others", "他处处理中"},
	"errors":            {"Errors", "错误"},
	"refunds_repaired":  {"Refunds repaired", "退款已修复"},
	"error":             {"Error", "错误信息"},
	"TOTAL":             {"Total", "合计"}, // a totals row; the CSV keeps the code, its historical marker
	// Statement columns.
	"bill_date":       {"Business day", "账单日期"},
	"payments":        {"Payments", "收款笔数"},
	"payments_amount": {"Paid in", "收款金额"},
	"refunds":         {"Refunds", "退款笔数"},
	"refunds_amount":  {"Refunded", "退款金额"},
	"received":        {"Received", "实收金额"},
	"fees":            {"Fees", "手续费"},
	"net":             {"Net", "结算净额"},
	"lines":           {"Bill lines", "账单行数"},
	"matched":         {"Matched", "已匹配"},
	"found":           {"Findings", "差异"},
	"held":            {"Held", "挂起"},
	"refunds_unknown": {"Unknown refunds", "未知退款"},
	"bill_sha256":     {"Bill SHA-256", "账单 SHA-256"},
	"bill_location":   {"Bill kept at", "账单存放位置"},
	// Finding kinds.
	"AMOUNT_MISMATCH":            {"Amount differs", "金额不符"},
	"CURRENCY_MISMATCH":          {"Currency differs", "币种不符"},
	"MERCHANT_MISMATCH":          {"Other merchant account", "商户号不符"},
	"UNKNOWN_ORDER":              {"Unknown order", "未知订单"},
	"PAID_AFTER_CLOSE":           {"Paid after close", "关单后支付"},
	"DUPLICATE_PAYMENT":          {"Paid twice", "重复支付"},
	"LOCAL_PAID_PLATFORM_UNPAID": {"Paid here, not at platform", "我方已付平台未付"},
	"REFUNDED_AT_PLATFORM":       {"Refunded at platform", "平台已退款"},
	"UNKNOWN_REFUND":             {"Refund we do not have", "未知退款"},
	"REFUND_AMOUNT_MISMATCH":     {"Refund amount differs", "退款金额不符"},
	"OVER_REFUNDED":              {"Refunded more than paid", "超额退款"},
	"REFUND_ABNORMAL":            {"Refund not paid back (abnormal)", "退款异常"},
	"REFUND_NOT_AT_PLATFORM":     {"Refund not at platform", "平台无此退款"},
	// Review statuses.
	"OPEN":             {"Open", "待处理"},
	"ACKNOWLEDGED":     {"Acknowledged", "已确认"},
	"PENDING_APPROVAL": {"Awaiting approval", "待审批"},
	"RESOLVED":         {"Resolved", "已处理"},
	// Resolutions.
	"refunded":       {"Refunded", "已退款"},
	"adjusted":       {"Adjusted", "已调账"},
	"written_off":    {"Written off", "已核销"},
	"accept_payment": {"Payment taken in", "确认收款入账"},
	"accepted":       {"Accepted", "已接受"},
	"false_positive": {"False positive", "误报"},
	// Runs.
	"once":        {"Once", "单次"},
	"scheduled":   {"Scheduled", "定时"},
	"backfill":    {"Backfill", "补查"},
	"statement":   {"Statement", "对账单"},
	"succeeded":   {"Succeeded", "成功"},
	"failed":      {"Failed", "失败"},
	"interrupted": {"Interrupted", "中断"},
	"running":     {"Running", "进行中"},
	// Platforms.
	"alipay":    {"Alipay", "支付宝"},
	"wechatpay": {"WeChat Pay", "微信支付"},
	// Report text.
	"report.title":            {"Reconciliation report", "对账报告"},
	"report.period":           {"Period", "期间"},
	"report.from":             {"From (included)", "起（含）"},
	"report.to":               {"To (excluded)", "止（不含）"},
	"report.to_day":           {"To (included)", "止（含）"},
	"report.zone":             {"Time zone", "时区"},
	"report.generated":        {"Generated", "生成时间"},
	"report.amounts":          {"Amounts in yuan (CNY).", "金额单位：元（人民币）。"},
	"report.card.findings":    {"Findings", "差异"},
	"report.card.stake":       {"Amount at stake", "涉及金额"},
	"report.card.runs":        {"Runs", "对账批次"},
	"report.card.errors":      {"Run errors", "批次错误"},
	"report.summary":          {"Summary by kind and review status", "按类型与复核状态汇总"},
	"report.summary.empty":    {"No findings were first or last seen in this period.", "本期间没有差异。"},
	"report.findings":         {"Findings first or last seen in the period", "本期间发现的差异"},
	"report.findings.empty":   {"No findings.", "没有差异。"},
	"report.runs":             {"Reconciliation runs started in the period", "本期间的对账批次"},
	"report.runs.empty":       {"No runs started in this period.", "本期间没有对账批次。"},
	"report.no_runs":          {"0 runs", "无批次"},
	"report.chart":            {"Findings first seen per day, by kind", "每日新发现差异（按类型）"},
	"report.chart.empty":      {"No findings were first seen in this period.", "本期间没有新发现的差异。"},
	"report.sheet.summary":    {"Summary", "汇总"},
	"report.sheet.findings":   {"Findings", "差异明细"},
	"report.sheet.runs":       {"Runs", "对账批次"},
	"report.sheet.statements": {"Statements", "对账单"},
	"report.statements":       {"Daily statements (the platforms' trade bills)", "每日对账单（平台交易账单）"},
	"report.statements.empty": {"No bill was reconciled for a day in this period.", "本期间没有核对过的账单。"},
	"report.sheet.audit":      {"Audit", "审计记录"},
	"report.audit":            {"Review moves recorded in the period", "本期间的复核操作记录"},
	"report.audit.empty":      {"Nobody moved a finding in this period.", "本期间没有复核操作。"},
	"audit_at":                {"When", "操作时间"},
	"finding_id":              {"Finding no.", "差异编号"},
	"actor":                   {"Person", "操作人"},
	"os_user":                 {"OS user", "系统用户"},
	"db_user":                 {"Database user", "数据库用户"},
	"yes":                     {"Yes", "是"},
	"no":                      {"No", "否"},
	// The review console's own words (its pages, buttons and messages).
	"title":                  {"Payment review", "支付对账复核"},
	"findings_list":          {"Findings", "差异列表"},
	"finding":                {"Finding", "差异"},
	"signed_in_as":           {"Signed in as", "当前用户"},
	"role_reviewer":          {"reviewer", "复核人"},
	"role_approver":          {"approver", "审批人"},
	"times_in":               {"Times in", "时区"},
	"merchant":               {"Merchant account", "商户号"},
	"provider":               {"Service provider", "服务商"},
	"via_provider":           {"via provider %s", "服务商 %s"}, // beneath a sub-merchant's id
	"from":                   {"From (date)", "起始日期"},
	"to":                     {"To (date, included)", "截止日期（含）"},
	"min":                    {"At stake from (¥)", "涉及金额不低于（¥）"},
	"max":                    {"At stake up to (¥)", "涉及金额不高于（¥）"},
	"sort":                   {"Sort by", "排序"},
	"order_desc":             {"newest / largest first", "最新 / 最大在前"},
	"order_asc":              {"oldest / smallest first", "最早 / 最小在前"},
	"filter":                 {"Show", "筛选"},
	"clear":                  {"Clear filters", "清除筛选"},
	"any":                    {"any", "全部"},
	"count":                  {"Findings", "笔数"},
	"total":                  {"Total", "合计"},
	"page":                   {"Page", "第几页"},
	"prev":                   {"Previous", "上一页"},
	"next":                   {"Next", "下一页"},
	"no_findings":            {"No findings match.", "没有符合条件的差异。"},
	"order_no":               {"Our order no.", "我方订单号"},
	"first_seen":             {"First seen", "首次发现"},
	"last_seen":              {"Last seen", "最近发现"},
	"open":                   {"Open", "查看"},
	"ours":                   {"Ours", "我方记录"},
	"theirs":                 {"The platform's", "平台记录"},
	"evidence":               {"Evidence", "证据"},
	"amount":                 {"Amount", "金额"},
	"order_status":           {"Status", "状态"},
	"sighting_history":       {"Sightings", "发现记录"},
	"sightings_note":         {"The finding is one row however often a pass sees it; a sighting with different figures raises the evidence version.", "同一差异无论被发现多少次都只记一行；数据不同的新发现会提升证据版本。"},
	"detail":                 {"What the pass recorded", "对账记录的详情"},
	"events":                 {"The order's payment and refund events", "订单支付与退款事件"},
	"event":                  {"Event", "事件"},
	"source":                 {"Source", "来源"},
	"when":                   {"When", "时间"},
	"no_events":              {"No payment events.", "没有支付事件。"},
	"no_order":               {"This finding names no order of ours.", "该差异没有对应的我方订单。"},
	"audit":                  {"Audit history", "审计记录"},
	"who":                    {"Who", "操作人"},
	"action":                 {"Action", "操作"},
	"from_status":            {"From", "原状态"},
	"to_status":              {"To", "新状态"},
	"version_seen":           {"Evidence version seen", "所见证据版本"},
	"no_audit":               {"Nobody has acted yet.", "尚无人处理。"},
	"actions":                {"What you can do", "可执行的操作"},
	"acknowledge":            {"Acknowledge", "确认知悉"},
	"resolve":                {"Resolve or propose", "处理或提议"},
	"approve":                {"Approve", "批准"},
	"reject":                 {"Reject", "驳回"},
	"reject_note":            {"Why (goes back to the proposer)", "驳回理由（将告知提议人）"},
	"no_actions":             {"Nothing for you to do on this finding now.", "您目前无需对该差异操作。"},
	"resolve_hint":           {"Refunded, adjusted and written off move money: they wait for a second person's approval.", "已退款、已调整、已核销涉及资金变动，需由另一人审批。"},
	"proposed_by":            {"Proposed by", "提议人"},
	"own_proposal":           {"You proposed this; a second person must approve it.", "这是您的提议，须由另一人审批。"},
	"reports":                {"Reports", "报表"},
	"download":               {"Download", "下载"},
	"report_period":          {"Period", "期间"},
	"local_order":            {"Our order", "我方订单"},
	"created":                {"Created", "创建时间"},
	"paid_at":                {"Paid at", "支付时间"},
	"currency":               {"Currency", "币种"},
	"back":                   {"All findings", "返回列表"},
	"done":                   {"Done:", "已完成："},
	"not_done":               {"Could not do that", "操作未完成"},
	"look_again":             {"The evidence changed since you read it: look again.", "证据在您查看后已变化，请重新查看。"},
	"self_approval":          {"You proposed this resolution; a second person must approve it.", "这是您的提议，须由另一人审批。"},
	"illegal":                {"Someone else already moved this finding; here is where it stands now.", "其他人已处理该差异，以下为最新状态。"},
	"forbidden_approve":      {"Only approvers may approve or reject.", "只有审批人可以批准或驳回。"},
	"not_found":              {"No such finding.", "没有这条差异。"},
	"csrf":                   {"The form expired (forms are good for 12 hours) or did not come from this console; reload the page and try again.", "表单已过期（表单有效期为 12 小时）或并非来自本系统，请刷新页面后重试。"},
	"none":                   {"—", "—"},
	"statements":             {"Daily statements", "每日对账单"},
	"statements_note":        {"Fees and net to the fen, the five decimals the platforms' bills state beneath; one row per business day and merchant account.", "手续费与结算净额精确到分，下方为平台账单的五位小数；每个账单日、每个商户号一行。"},
	"bad_bytes":              {"A filter holds bytes that are not text (a NUL byte or invalid UTF-8): clear it and type it again.", "筛选条件中含有非文本字节（空字节或无效的 UTF-8 编码），请清除后重新输入。"},
	"order_refunds":          {"The order's refunds", "订单的退款"},
	"refund":                 {"Refund", "退款"},
	"refund_no":              {"Refund no.", "退款单号"},
	"platform_refund_no":     {"Platform's refund no.", "平台退款单号"},
	"succeeded_at":           {"Succeeded at", "退款成功时间"},
	"no_refunds":             {"No refunds.", "没有退款。"},
	"refunded_minor":         {"Refunded / paid", "已退款 / 已支付"},
	"refund_not_ours":        {"not in our records", "我方无此退款记录"},
	"search":                 {"Search", "搜索"},
	"search_hint":            {"Order, trade or refund no., or finding #", "商户订单号、交易号、退款单号或差异编号"},
	"age":                    {"Age", "已等待"},
	"overdue":                {"Overdue", "已逾期"},
	"overdue_only":           {"Overdue only", "仅看逾期"},
	"sla":                    {"Due within", "处理时限"},
	"approvals":              {"Approvals", "待审批"},
	"for_you":                {"Proposals for you to decide", "待您审批的提议"},
	"your_proposals":         {"Your own proposals (a second approver decides them)", "您的提议（须由另一位审批人审批）"},
	"by_account":             {"By platform and merchant account", "按支付平台与商户号"},
	"all_accounts":           {"all accounts", "全部商户号"},
	"bulk":                   {"Act on several findings at once (each is its own move, with its own audit row)", "批量处理（每条差异单独处理，各有审计记录）"},
	"bulk_action":            {"Action", "操作"},
	"choose":                 {"— choose —", "— 请选择 —"},
	"bulk_selected":          {"Apply to the selected", "应用于所选"},
	"bulk_all":               {"Apply to all that match…", "应用于全部符合条件的…"},
	"bulk_confirm":           {"This applies to every finding the filter matches now, each as its own move: one whose evidence changes before you confirm is left alone.", "此操作将逐条应用于当前符合筛选条件的全部差异；确认前证据发生变化的差异将不受影响。"},
	"confirm":                {"Confirm", "确认"},
	"bulk_done":              {"Moved", "已处理"},
	"bulk_refused":           {"Not moved", "未处理"},
	"reason":                 {"Why", "原因"},
	"bulk_none":              {"Select at least one finding, or apply to all that match.", "请至少选择一条差异，或应用于全部符合条件的差异。"},
	"bulk_choose":            {"choose an action.", "请选择操作。"},
	"bulk_reject_note":       {"a rejection needs a note saying why.", "驳回须填写理由。"},
	"bulk_resolution":        {"choose a resolution.", "请选择处理结果。"},
	"bulk_too_many":          {"More than 1,000 findings match: narrow the filter (a batch is at most 1,000).", "符合条件的差异超过 1,000 条，请缩小筛选范围（每批最多 1,000 条）。"},
	"bulk_stopped":           {"The database stopped answering part way: the findings listed were not moved; try them again.", "处理中途数据库无响应：所列差异未处理，请重试。"},
	"does.refunded":          {"Records that the money went back to the buyer. payrecon moves no money itself. A second person approves.", "记录款项已退还买家。payrecon 不会自行转移资金。须由另一人审批。"},
	"does.adjusted":          {"Records that the books or the order were corrected by hand. payrecon changes no order itself. A second person approves; say why in the note.", "记录已手工更正账目或订单。payrecon 不会自行修改订单。须由另一人审批，并在备注中说明原因。"},
	"does.written_off":       {"Absorbs the difference as a loss. Nothing is paid or refunded. A second person approves; say why in the note.", "将差额作为损失核销，不付款也不退款。须由另一人审批，并在备注中说明原因。"},
	"does_not_fit":           {"%s does not fit this finding: it takes in only a payment made after the order was closed, or one of another amount the merchant accepts.", "“%s”不适用于此差异：它只用于关单后支付的款项，或商户接受的金额不符的款项。"},
	"does.accept_payment":    {"Takes the platform's payment into the books: once a second person approves, the order becomes PAID with the amount the platform took, one payment event (source review) and one fulfilment message for downstream. It refunds nothing and changes no other order; if the buyer should get the money back, propose Refunded instead.", "将平台已收的款项计入账目：另一人审批后，订单按平台实收金额变为“已支付”，记一条支付事件（来源：复核），并向下游发送一条履约消息。不会退款，也不改动其他订单；如应退款给买家，请改为提议“已退款”。"},
	"does.accepted":          {"The difference is explained and fine as it is. Resolved at once; nothing moves.", "差异已有合理解释，无需处理。立即办结，不涉及资金变动。"},
	"does.false_positive":    {"There was nothing wrong. Resolved at once; nothing moves.", "并无问题（误报）。立即办结，不涉及资金变动。"},
	"withdraw":               {"Withdraw", "撤回"},
	"withdraw_hint":          {"Take your proposal back: the finding returns to acknowledged.", "撤回您的提议：差异回到“已确认”状态。"},
	"audit.withdraw":         {"withdrawn", "撤回"},
	"not_reconciled":         {"Not reconciled", "未对账"},
	"not_reconciled_note":    {"No statement run saved these days for accounts that have others: not a day without trades (those are saved, with zeros). Run reconciler statement --date for them.", "这些账单日没有对账记录（无交易的日子也会保存为零）。请对这些日期运行 reconciler statement --date。"},
	"bill_lines":             {"Bill lines", "账单明细"},
	"lines_note":             {"The lines a statement run remembered: those it repaired, those that found something, those already right, and matches our books date on another day. The day's other lines matched plainly and are counted in its figures.", "对账时记录下的账单行：已补单的、发现差异的、无需处理的，以及我方记录在其他日期的匹配行。当天其余账单行均已直接匹配，计入当日数据。"},
	"line_no":                {"Line", "行号"},
	"line_kind":              {"Kind", "类型"},
	"line_kind.payment":      {"Payment", "收款"},
	"line_kind.refund":       {"Refund", "退款"},
	"line_result":            {"What became of it", "处理结果"},
	"line.repaired":          {"Repaired", "已补单"},
	"line.mismatch":          {"Finding", "发现差异"},
	"line.unchanged":         {"Already right", "无需处理"},
	"line.other_day":         {"Matched, another day", "已匹配（其他日期）"},
	"no_lines":               {"No lines remembered for this day.", "该日没有记录的账单行。"},
	"awaiting_approver":      {"Proposals awaiting an approver", "等待审批人审批的提议"},
	"why_not_approver":       {"You review: only an approver (RECONCILER_APPROVERS) may approve or reject these proposals.", "您是复核人：只有审批人（RECONCILER_APPROVERS）可以批准或驳回这些提议。"},
	"proposed_resolution":    {"Proposed resolution", "提议的处理结果"},
	"waiting":                {"Waiting", "已等待"},
	"no_approvals":           {"None.", "无。"},
	"why_resolved":           {"Resolved: nothing is left to do. A sighting with different figures would reopen it.", "已处理，无需再操作。若再次发现且数据不同，将重新打开。"},
	"why_awaiting":           {"Awaiting a second person's approval: only an approver (RECONCILER_APPROVERS) may approve or reject it.", "等待另一人审批：只有审批人（RECONCILER_APPROVERS）可以批准或驳回。"},
	"why_no_second_approver": {"No other approver is configured, so this proposal cannot be approved: ask an administrator to add a second approver to RECONCILER_APPROVERS.", "没有配置其他审批人，此提议无法获批：请管理员在 RECONCILER_APPROVERS 中添加第二位审批人。"},
	// Why a page cannot do what it was asked: formats (fmt verbs, the same in both
	// languages), filled by the console's problems. An English argument the Chinese page
	// cannot translate (the rules' own text) is dropped there by %.0s.
	"bad_input":               {"The form is incomplete: %s", "表单不完整：%s"},
	"not_understood":          {"%s", "无法识别所填内容，请检查后重试。%.0s"},
	"bad_review":              {"The form is incomplete: %s", "复核规则不允许对该差异执行此操作。%.0s"},
	"needs_note":              {"%s needs a note saying why.", "“%s”须在备注中说明原因。"},
	"only_proposer_withdraws": {"Only its proposer may withdraw a proposal.", "只有提议人本人可以撤回提议。"},
	"want_search":             {"%s: a search is at most %d printable characters (an id, or the start of an order, trade or refund number)", "%s：最多 %d 个可打印字符（差异编号，或商户订单号、交易号、退款单号的开头）"},
	"want_choice":             {"%s: unknown %q", "%s：无法识别「%s」"},
	"want_page":               {"%s: want a page number, got %q", "%s：请输入页码（收到「%s」）"},
	"want_amount":             {"%s: want an amount in yuan such as 100 or 1234.50, got %q", "%s：请输入以元为单位的金额，例如 100 或 1234.50（收到「%s」）"},
	"want_date":               {"%s: want a date such as 2026-11-28, got %q", "%s：请输入日期，例如 2026-11-28（收到「%s」）"},
	"period_backwards":        {"%s: the period ends before it starts", "%s：早于起始日期"},
	"period_max_days":         {"%s: at most %d days at a time", "%s：每次最多 %d 天"},
	"want_selection":          {"a selected finding %q is not <id>.<version>", "所选差异「%s」格式无效（应为“编号.版本”）"},
	"want_format":             {"format must be csv, xlsx or html", "格式须为 csv、xlsx 或 html"},
	"need_period":             {"from, to", "请填写起始日期和截止日期"},
	"unreadable_form":         {"unreadable form", "无法读取表单"},
	"sign_in":                 {"sign in through the finance sign-in proxy", "请通过财务登录代理登录"},
	"not_listed":              {"%s is not a reviewer (RECONCILER_REVIEWERS) or approver (RECONCILER_APPROVERS)", "%s 不是复核人（RECONCILER_REVIEWERS）或审批人（RECONCILER_APPROVERS）"},
	"db_down":                 {"the review database did not answer; try again", "复核数据库没有响应，请重试"},
	"render_failed":           {"the page could not be drawn", "页面生成失败"},
	"http.400":                {"400 bad request: %s", "400 请求有误：%s"},
	"http.401":                {"401 unauthorized: %s", "401 未登录：%s"},
	"http.403":                {"403 forbidden: %s", "403 禁止访问：%s"},
	"http.404":                {"404 page not found", "404 页面不存在"},
	"http.500":                {"500 internal error: %s", "500 内部错误：%s"},
	// The fields a problem names: their names in the query on the English page (as typed
	// in a URL), their labels on the Chinese one.
	"field.from":     {"from", "起始日期"},
	"field.to":       {"to", "截止日期"},
	"field.min":      {"min", "涉及金额下限"},
	"field.max":      {"max", "涉及金额上限"},
	"field.kind":     {"kind", "差异类型"},
	"field.platform": {"platform", "支付平台"},
	"field.provider": {"provider", "服务商"},
	"field.status":   {"status", "复核状态"},
	"field.sort":     {"sort", "排序"},
	"field.page":     {"page", "页码"},
	"field.q":        {"q", "搜索"},
	"field.version":  {"version", "证据版本"},
	// Words of the database only the console shows: audit actions, order and refund statuses, event types and sources.
	"audit.acknowledge": {"acknowledged", "确认知悉"},
	"audit.resolve":     {"resolved", "处理"},
	"audit.propose":     {"proposed", "提议"},
	"audit.approve":     {"approved", "批准"},
	"audit.reject":      {"rejected", "驳回"},
	"audit.reopen":      {"reopened by new evidence", "因新证据重新打开"},
	"PENDING":           {"Pending", "待支付"},
	"PAID":              {"Paid", "已支付"},
	"CLOSED":            {"Closed", "已关闭"},
	"FAILED":            {"Failed", "失败"},
	"REFUNDED":          {"Refunded", "已退款"},
	"notify":            {"Callback", "回调"},
	"reconcile":         {"Reconciliation", "对账"},
	"review":            {"Finance review", "财务复核"},
	"PROCESSING":        {"Processing", "退款处理中"},
	"SUCCESS":           {"Succeeded", "退款成功"},
	"ABNORMAL":          {"Abnormal: not paid back", "退款异常（未退回）"},
	"REFUND_SUCCESS":    {"Refund succeeded", "退款成功"},
	"REFUND_CLOSED":     {"Refund closed", "退款关闭"},
}
