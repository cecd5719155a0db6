package console

import (
	"net/http"
	"time"

	"golang.org/x/text/language"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// Languages the console speaks, English first (the fallback).
var (
	langs   = []language.Tag{language.English, language.SimplifiedChinese}
	matcher = language.NewMatcher(langs)
)

// lang picks English or Simplified Chinese from Accept-Language.
func lang(r *http.Request) string {
	tags, _, _ := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	_, idx, _ := matcher.Match(tags...)
	if idx == 1 {
		return "zh"
	}
	return "en"
}

// labels are the words people read; the keys are the names in the database and the code.
var labels = map[string]map[string]string{
	"en": {
		"title": "Payment review", "findings": "Findings", "finding": "Finding", "signed_in_as": "Signed in as",
		"role_reviewer": "reviewer", "role_approver": "approver", "times_in": "Times in",
		"status": "Review status", "kind": "Kind", "platform": "Platform", "merchant": "Merchant account",
		"from": "From (date)", "to": "To (date, included)", "min": "At stake from (¥)", "max": "At stake up to (¥)",
		"sort": "Sort by", "order_desc": "newest / largest first", "order_asc": "oldest / smallest first",
		"filter": "Show", "clear": "Clear filters", "any": "any", "count": "Findings", "at_stake": "At stake",
		"total": "Total", "page": "Page", "prev": "Previous", "next": "Next", "no_findings": "No findings match.",
		"order_no": "Our order no.", "platform_trade_no": "Platform's trade no.", "first_seen": "First seen",
		"last_seen": "Last seen", "seen_count": "Times seen", "open": "Open",
		"ours": "Ours", "theirs": "The platform's", "evidence": "Evidence", "amount": "Amount",
		"order_status": "Status", "evidence_version": "Evidence version", "sightings": "Sightings",
		"sightings_note": "The finding is one row however often a pass sees it; a sighting with different figures raises the evidence version.",
		"detail":         "What the pass recorded", "events": "The order's payment and refund events", "event": "Event", "source": "Source",
		"when": "When", "no_events": "No payment events.", "no_order": "This finding names no order of ours.",
		"audit": "Audit history", "who": "Who", "action": "Action", "from_status": "From", "to_status": "To",
		"resolution": "Resolution", "note": "Note", "version_seen": "Evidence version seen", "no_audit": "Nobody has acted yet.",
		"actions": "What you can do", "acknowledge": "Acknowledge", "resolve": "Resolve or propose", "approve": "Approve",
		"reject": "Reject", "reject_note": "Why (goes back to the proposer)", "no_actions": "Nothing for you to do on this finding now.",
		"resolve_hint": "Refunded, adjusted and written off move money: they wait for a second person's approval.",
		"proposed_by":  "Proposed by", "own_proposal": "You proposed this; a second person must approve it.",
		"reports": "Reports", "download": "Download", "report_period": "Period", "local_order": "Our order",
		"created": "Created", "paid_at": "Paid at", "currency": "Currency", "resolved_by": "Resolved by",
		"approved_by": "Approved by", "back": "All findings", "done": "Done:", "error": "Could not do that",
		"look_again": "The evidence changed since you read it: look again.", "self_approval": "You proposed this resolution; a second person must approve it.",
		"illegal": "Someone else already moved this finding; here is where it stands now.", "bad_request": "The form is incomplete:",
		"forbidden_approve": "Only approvers may approve or reject.", "not_found": "No such finding.",
		"csrf":        "The form expired (forms are good for 12 hours) or did not come from this console; reload the page and try again.",
		"resolved_at": "Resolved at", "none": "—", "id": "Number",
		"statements":      "Daily statements",
		"statements_note": "Fees and net to five decimals, as the platforms' bills state them; one row per business day and merchant account.",
		"bad_bytes":       "A filter holds bytes that are not text (a NUL byte or invalid UTF-8): clear it and type it again.",
		"refunds":         "The order's refunds", "refund": "Refund", "refund_no": "Refund no.",
		"platform_refund_no": "Platform's refund no.", "succeeded_at": "Succeeded at", "no_refunds": "No refunds.",
		"refunded_minor": "Refunded / paid", "refund_not_ours": "not in our records",
	},
	"zh": {
		"title": "支付对账复核", "findings": "差异列表", "finding": "差异", "signed_in_as": "当前用户",
		"role_reviewer": "复核人", "role_approver": "审批人", "times_in": "时区",
		"status": "复核状态", "kind": "类型", "platform": "支付平台", "merchant": "商户号",
		"from": "起始日期", "to": "截止日期（含）", "min": "涉及金额不低于（¥）", "max": "涉及金额不高于（¥）",
		"sort": "排序", "order_desc": "最新 / 最大在前", "order_asc": "最早 / 最小在前",
		"filter": "筛选", "clear": "清除筛选", "any": "全部", "count": "笔数", "at_stake": "涉及金额",
		"total": "合计", "page": "第几页", "prev": "上一页", "next": "下一页", "no_findings": "没有符合条件的差异。",
		"order_no": "我方订单号", "platform_trade_no": "平台交易号", "first_seen": "首次发现",
		"last_seen": "最近发现", "seen_count": "发现次数", "open": "查看",
		"ours": "我方记录", "theirs": "平台记录", "evidence": "证据", "amount": "金额",
		"order_status": "状态", "evidence_version": "证据版本", "sightings": "发现记录",
		"sightings_note": "同一差异无论被发现多少次都只记一行；数据不同的新发现会提升证据版本。",
		"detail":         "对账记录的详情", "events": "订单支付与退款事件", "event": "事件", "source": "来源",
		"when": "时间", "no_events": "没有支付事件。", "no_order": "该差异没有对应的我方订单。",
		"audit": "审计记录", "who": "操作人", "action": "操作", "from_status": "原状态", "to_status": "新状态",
		"resolution": "处理结果", "note": "备注", "version_seen": "所见证据版本", "no_audit": "尚无人处理。",
		"actions": "可执行的操作", "acknowledge": "确认知悉", "resolve": "处理或提议", "approve": "批准",
		"reject": "驳回", "reject_note": "驳回理由（将告知提议人）", "no_actions": "您目前无需对该差异操作。",
		"resolve_hint": "已退款、已调整、已核销涉及资金变动，需由另一人审批。",
		"proposed_by":  "提议人", "own_proposal": "这是您的提议，须由另一人审批。",
		"reports": "报表", "download": "下载", "report_period": "期间", "local_order": "我方订单",
		"created": "创建时间", "paid_at": "支付时间", "currency": "币种", "resolved_by": "处理人",
		"approved_by": "审批人", "back": "返回列表", "done": "已完成：", "error": "操作未完成",
		"look_again": "证据在您查看后已变化，请重新查看。", "self_approval": "这是您的提议，须由另一人审批。",
		"illegal": "其他人已处理该差异，以下为最新状态。", "bad_request": "表单不完整：",
		"forbidden_approve": "只有审批人可以批准或驳回。", "not_found": "没有这条差异。",
		"csrf":        "表单已过期（表单有效期为 12 小时）或并非来自本系统，请刷新页面后重试。",
		"resolved_at": "处理时间", "none": "—", "id": "编号",
		"statements":      "每日对账单",
		"statements_note": "手续费与结算净额按平台账单保留五位小数；每个账单日、每个商户号一行。",
		"bad_bytes":       "筛选条件中含有非文本字节（空字节或无效的 UTF-8 编码），请清除后重新输入。",
		"refunds":         "订单的退款", "refund": "退款", "refund_no": "退款单号",
		"platform_refund_no": "平台退款单号", "succeeded_at": "退款成功时间", "no_refunds": "没有退款。",
		"refunded_minor": "已退款 / 已支付", "refund_not_ours": "我方无此退款记录",
	},
}

// names are the labels of the database's words the reports do not show (audit actions,
// order statuses, event sources); the rest are render.Label's, so the console and the
// reports call a thing by one name.
var names = map[string]map[string]string{
	"en": {
		reconcile.AuditAcknowledge: "acknowledged", reconcile.AuditResolve: "resolved", reconcile.AuditPropose: "proposed",
		reconcile.AuditApprove: "approved", reconcile.AuditReject: "rejected", reconcile.AuditReopen: "reopened by new evidence",
		"PENDING": "Pending", "PAID": "Paid", "CLOSED": "Closed", "FAILED": "Failed", "REFUNDED": "Refunded",
		"notify": "Callback", "reconcile": "Reconciliation", "backfill": "Backfill",
		// Refund statuses and the events of refund transitions.
		"PROCESSING": "Processing", "SUCCESS": "Succeeded", "ABNORMAL": "Abnormal: not paid back",
		"REFUND_SUCCESS": "Refund succeeded", "REFUND_CLOSED": "Refund closed", "REFUND_ABNORMAL": "Refund abnormal",
	},
	"zh": {
		reconcile.AuditAcknowledge: "确认知悉", reconcile.AuditResolve: "处理", reconcile.AuditPropose: "提议",
		reconcile.AuditApprove: "批准", reconcile.AuditReject: "驳回", reconcile.AuditReopen: "因新证据重新打开",
		"PENDING": "待支付", "PAID": "已支付", "CLOSED": "已关闭", "FAILED": "失败", "REFUNDED": "已退款",
		"notify": "回调", "reconcile": "对账", "backfill": "补查",
		"PROCESSING": "退款处理中", "SUCCESS": "退款成功", "ABNORMAL": "退款异常（未退回）",
		"REFUND_SUCCESS": "退款成功", "REFUND_CLOSED": "退款关闭", "REFUND_ABNORMAL": "退款异常",
	},
}

// text is the label of key in lang; a missing key shows itself (TestEveryLabelInBothLanguages
// only checks that both languages name the same keys).
func text(lang, key string) string {
	if s, ok := labels[lang][key]; ok {
		return s
	}
	return key
}

// name is the label of a database word; an unknown word is shown as it is.
func name(lang, word string) string {
	if s, ok := names[lang][word]; ok {
		return s
	}
	return render.Label(render.Lang(lang), word)
}

// yuan formats minor units as ¥1,234.56.
func yuan(minor int64) string { return render.Yuan(minor) }

// yuanPtr is yuan for a nullable amount ("—" when unknown).
func yuanPtr(minor *int64) string {
	if minor == nil {
		return "—"
	}
	return yuan(*minor)
}

// clock formats a time in the console's zone.
func clock(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05")
}
