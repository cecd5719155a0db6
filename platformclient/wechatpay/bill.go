package wechatpay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// TradeBillPath asks for a day's trade bill download URL.
const TradeBillPath = "/v3/bill/tradebill"

// BillPublishHour is when (China time) WeChat Pay publishes the previous day's bill.
const BillPublishHour = 10

// The answers WeChat Pay gives instead of a bill.
const (
	// codeNoStatement is both "not published yet" and, once the bill is due, "the account had
	// no trades that day": WeChat Pay makes no file for an empty day.
	codeNoStatement = "NO_STATEMENT_EXIST"
	codeCreating    = "STATEMENT_CREATING" // being made: always "ask later"
	codeBillMissing = "BILL_NOT_EXIST"     // older wording, of unknown meaning: "ask later"
)

// billAbsence is what an answer without a bill means.
type billAbsence int

const (
	absenceNone     billAbsence = iota // not a "no bill" code: an error like any other
	absenceNotReady                    // not published yet: ask again at the retry time
	absenceNoTrades                    // published as nothing: the account had no trades
)

// absence decides, once, what a "no bill" answer (code) about day means at now: only the
// clock tells WeChat Pay's NO_STATEMENT_EXIST for an empty day (from BillPublishHour the next
// morning, China time) from the same code for a bill not made yet.
func absence(code string, day, now time.Time) billAbsence {
	switch code {
	case codeNoStatement:
		if platformclient.BillDue(day, BillPublishHour, now) {
			return absenceNoTrades
		}
		return absenceNotReady
	case codeCreating, codeBillMissing:
		return absenceNotReady
	}
	return absenceNone
}

// tradeBill is the download-URL answer.
type tradeBill struct {
	HashType    string `json:"hash_type"`
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
	// noTrades: no bill, because the account had no trades that day (nothing to download).
	noTrades bool
}

// DownloadBill fetches the ALL trade bill of day (its date in China time), gzip, into dir:
// the signed download-URL query (its answer verified), then the signed download (whose
// answer WeChat Pay does not sign). The declared SHA1 of the unzipped bill is in the
// BillInfo for the reader to check. A bill not yet published is a
// *platformclient.BillNotReadyError in the chain; a day without trades (NO_STATEMENT_EXIST once
// the bill is due) is a BillInfo with Empty set and no file.
func (c *Client) DownloadBill(ctx context.Context, day time.Time, dir string) (platformclient.BillInfo, error) {
	d := platformclient.BillDay(day)
	info := platformclient.BillInfo{Platform: reconcile.WechatPay, MerchantID: c.MerchantID(), Day: d, Gzip: true}
	q := url.Values{"bill_date": {d.Format("2006-01-02")}, "bill_type": {"ALL"}, "tar_type": {"GZIP"}}
	if c.subMchID != "" {
		// A provider asks for one sub-merchant's bill; without sub_mchid it would get all
		// of its sub-merchants' trades in one file.
		q.Set("sub_mchid", c.subMchID)
	}
	var tb tradeBill
	err := c.policy.Do(ctx, "tradebill", func(ctx context.Context) error {
		a, err := c.call(ctx, http.MethodGet, TradeBillPath+"?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		tb, err = c.tradeBillAnswer(ctx, a, d)
		return err
	})
	if err == nil && tb.noTrades {
		c.log.Info().Str("bill_date", q.Get("bill_date")).Msg("wechatpay has no bill: the account had no trades that day")
		info.Empty = true
		return info, nil
	}
	if err == nil {
		info.HashType, info.HashValue = tb.HashType, strings.ToLower(tb.HashValue)
		name := fmt.Sprintf("wechatpay_%s_%s_ALL.csv.gz", c.MerchantID(), d.Format("20060102"))
		err = c.policy.DoTimeout(ctx, "bill download", c.cfg.downloadTimeout(), func(ctx context.Context) error {
			return c.downloadBill(ctx, tb.DownloadURL, dir, name, &info)
		})
	}
	if err != nil {
		return platformclient.BillInfo{}, c.logFailure("tradebill "+q.Get("bill_date"), "", err)
	}
	c.log.Info().Str("bill_date", q.Get("bill_date")).Str("path", info.Path).Int64("bytes", info.Bytes).
		Str("sha256", info.SHA256).Msg("wechatpay bill downloaded")
	return info, nil
}

// tradeBillAnswer reads the download-URL answer: the URL and digest, no trades that day, not
// ready yet, or a classified failure.
func (c *Client) tradeBillAnswer(ctx context.Context, a answer, day time.Time) (tradeBill, error) {
	var tb tradeBill
	if a.status/100 != 2 {
		now := c.cfg.Now()
		switch absence(a.apiErr.Code, day, now) {
		case absenceNoTrades:
			// An empty day is signed off with zero figures and reports its held orders, so the
			// answer is evidence only when it verifies: anyone on the path can strip headers.
			if !hasSignatureHeaders(a.header) {
				return tb, c.badSignature(a, "unsigned "+codeNoStatement+" answer")
			}
			if err := c.verify(ctx, a); err != nil {
				return tb, err
			}
			tb.noTrades = true
			return tb, nil
		case absenceNotReady:
			return tb, platformclient.NotReady(&platformclient.BillNotReadyError{
				Platform: reconcile.WechatPay, MerchantID: c.MerchantID(), Day: day, Code: a.apiErr.Code,
				Message: a.apiErr.Message, RetryAt: platformclient.BillRetryAt(day, BillPublishHour, now),
			})
		}
		return tb, classify(a.status, a.apiErr)
	}
	if err := json.Unmarshal(a.raw, &tb); err != nil || tb.DownloadURL == "" {
		return tb, platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "UNPARSEABLE", "answer has no download_url", err)
	}
	if !strings.EqualFold(tb.HashType, "SHA1") || len(tb.HashValue) != 40 {
		return tb, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "HASH_TYPE",
			fmt.Sprintf("bill digest %s %q is not a SHA1", tb.HashType, tb.HashValue), nil)
	}
	return tb, nil
}

// downloadBill GETs the bill, signed like any request, and saves it.
func (c *Client) downloadBill(ctx context.Context, link, dir, name string, info *platformclient.BillInfo) error {
	req, err := c.signedRequest(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return platformclient.SaveBill(reconcile.WechatPay, dir, name, resp.Body, info)
	}
	raw, _ := platformclient.ReadBody(resp.Body)
	a, err := readAnswer(resp, raw)
	if err != nil {
		return err
	}
	return classify(a.status, a.apiErr)
}

func (c Config) downloadTimeout() time.Duration {
	if c.DownloadTimeout > 0 {
		return c.DownloadTimeout
	}
	return platformclient.DefaultDownloadTimeout
}
