package alipay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// MethodBillDownloadURL asks for the day's bill download URL.
const MethodBillDownloadURL = "alipay.data.dataservice.bill.downloadurl.query"

// BillPublishHour is when (China time) Alipay publishes the previous day's bill.
const BillPublishHour = 9

// billURLAttempts bounds how often an expired download URL (valid about 30 s) is asked for
// again.
const billURLAttempts = 2

// DownloadBill fetches the trade bill of day (its date in China time) into dir: the download
// URL from the gateway, then the zip, both under the client's call policy. A bill not yet
// published is a *platformclient.BillNotReadyError in the chain.
func (c *Client) DownloadBill(ctx context.Context, day time.Time, dir string) (platformclient.BillInfo, error) {
	d := platformclient.BillDay(day)
	info := platformclient.BillInfo{Platform: reconcile.Alipay, MerchantID: c.MerchantID(), Day: d}
	biz := map[string]string{"bill_type": "trade", "bill_date": d.Format("2006-01-02")}
	var err error
	for range billURLAttempts {
		var link string
		err = c.policy.Do(ctx, MethodBillDownloadURL, func(ctx context.Context) error {
			a, err := c.call(ctx, MethodBillDownloadURL, biz)
			if err != nil {
				return err
			}
			link, err = c.billURL(a, d)
			return err
		})
		if err != nil {
			break
		}
		err = c.policy.DoTimeout(ctx, "bill download", c.cfg.downloadTimeout(), func(ctx context.Context) error {
			return c.download(ctx, link, dir, billFileName(link, c.MerchantID(), d), &info)
		})
		if reconcile.PlatformErrorKindOf(err) != reconcile.KindPermanent || !strings.HasPrefix(codeOf(err), "URL") {
			break
		}
	}
	if err != nil {
		return platformclient.BillInfo{}, c.logFailure(MethodBillDownloadURL, biz, err)
	}
	c.log.Info().Str("bill_date", biz["bill_date"]).Str("path", info.Path).Int64("bytes", info.Bytes).
		Str("sha256", info.SHA256).Msg("alipay bill downloaded")
	return info, nil
}

// billURL reads the download-URL answer: the URL, not ready yet, or a classified failure.
func (c *Client) billURL(a answer, day time.Time) (string, error) {
	code := string(a.common.Code)
	if code == codeSuccess {
		if !a.verified {
			return "", c.badSignature(MethodBillDownloadURL, a, "success answer without a valid sign")
		}
		var n struct {
			URL string `json:"bill_download_url"`
		}
		if err := json.Unmarshal(a.env.Node, &n); err != nil || n.URL == "" {
			return "", platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, "UNPARSEABLE", "answer has no bill_download_url", err)
		}
		return n.URL, nil
	}
	if billNotReady(a.common.SubCode) {
		return "", platformclient.NotReady(&platformclient.BillNotReadyError{
			Platform: reconcile.Alipay, MerchantID: c.MerchantID(), Day: day, Code: code + "/" + a.common.SubCode,
			Message: strings.TrimSpace(a.common.Msg + " " + a.common.SubMsg),
			RetryAt: platformclient.BillRetryAt(day, BillPublishHour, c.cfg.Now()),
		})
	}
	return "", classify(a.common)
}

// billNotReady recognises Alipay's "no bill (yet)" sub-codes: isp.bill_not_exist and the
// variants seen in the SDKs' parsers.
func billNotReady(sub string) bool {
	s := strings.ToLower(sub)
	return strings.Contains(s, "bill_not_exist") || strings.Contains(s, "bill_not_ready")
}

// billFileName is the downloadFileName the URL carries (<userId>_<yyyyMMdd>.csv.zip), or a
// name of our own.
func billFileName(link, appID string, day time.Time) string {
	if u, err := url.Parse(link); err == nil {
		if n := path.Base(u.Query().Get("downloadFileName")); n != "" && n != "." && n != "/" && !strings.HasPrefix(n, ".") {
			return n
		}
	}
	return fmt.Sprintf("alipay_%s_%s.csv.zip", appID, day.Format("20060102"))
}

// download GETs the bill file (the URL is its own credential: nothing to sign) into dir.
func (c *Client) download(ctx context.Context, link, dir, name string, info *platformclient.BillInfo) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "URL", "unusable bill_download_url", err)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return platformclient.SaveBill(reconcile.Alipay, dir, name, resp.Body, info)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return httpStatusError(resp.StatusCode)
	}
	// The URL lives about 30 seconds: a refusal means ask for a new one.
	return platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "URL_EXPIRED",
		fmt.Sprintf("bill download refused with HTTP %d", resp.StatusCode), nil)
}

func codeOf(err error) string {
	var pe *reconcile.PlatformError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (c Config) downloadTimeout() time.Duration {
	if c.DownloadTimeout > 0 {
		return c.DownloadTimeout
	}
	return platformclient.DefaultDownloadTimeout
}
