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

type label struct{ en, zh string }

// labels is the label table (data, not logic).
var labels = map[string]label{
	// Columns.
	"id":                {"#", "编号"},
	"kind":              {"Finding", "差异类型"},
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
}
