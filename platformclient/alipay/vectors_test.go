package alipay

import (
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
)

// Source: alipay/alipay-sdk-java-all src/test/java/com/alipay/api/RSACheckTest.java. The SDK
// verifies these with rsaCheckV2, whose content drops only sign and keeps sign_type: the
// same rule as request signing (notifications use rsaCheckV1, which drops sign_type too).
// The key is the public key of its fixture certificate appCertPublicKey_2019091767145019.crt.
var javaSDKVectors = []struct {
	name   string
	params map[string]string
}{
	{
		name: "should_pass_rsa_check_when_sign_type_is_rsa2",
		params: map[string]string{
			"method":    "koubei.marketing.data.indicator.query",
			"app_id":    "2019090366875133",
			"sign_type": "RSA2",
			"sign": "JzoDc8VxY1/w6yN9WdWV10aipS3YcRpK" +
				"+jw4xfLybf90ZK9L3AHLUJbNLWVnHW3IuLoJbBeSGVxSbPBhe4ggPklcYUkPowgtlZ6YlthuQDtjF23h2obXuXkQRd" +
				"+RPbDWvOA5AYQjsKH8uSHil5aRARewPIPhukl9Mn4HEovUccsBR/RirQFSGmGYiMM0zvhVSR7pXZDEhiADzvzAkvVVTI1" +
				"/HbNqcoBU4ctSPAGsuDPO/mah1+IwGQAuPP6xoEPL" +
				"+3zQ0wztQCwHT2o8aQmxFJ9a09q8ybRprHaNjCgTaLDeTWE0o1pllZIE8c7wnG3cOuj6quYjTcQyLm6P4M87Zw==",
		},
	},
	{
		name: "should_pass_rsa_check_when_charset_is_utf8",
		params: map[string]string{
			"method":    "koubei.marketing.data.indicator.query",
			"app_id":    "2019090366875133",
			"extra":     "中文测试",
			"sign_type": "RSA2",
			"sign":      "KrRGUY3/2JX3KtlLgus8CbK0xuUIBDCpOdJkVzJDefez6HvlA8RA6uCVj2rrMd7DgVfarG5SROdSnkZbf8MLKHbVoFqi9w0QCvto9mc8n3ezfWejZECJVCZhbJ3OslB+4gij9+F70usrnCNEJZm02ntyNdVzcqMbgdRMB93BJIRC1jjmCotpXgXWrRdTb/SfhIAkoHqgGi2aCUHuLDInLGZCn8NeziGWMnFOic6/sE/nMpwriOmwLb2nyzD0fGiolwuuxlOGMcBHAb22J8XqchFHyCpbs2A/rWdJMjhUfqsErbtZQM93fi1xfL2pUa9RMWX0Q81Qk7iSEeHCR+NGyQ==",
		},
	},
}

func TestKnownAnswerJavaSDKRSACheck(t *testing.T) {
	der, err := os.ReadFile("testdata/alipay-sdk-java-all_appCertPublicKey_2019091767145019.crt")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := platformclient.LoadPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range javaSDKVectors {
		form := url.Values{}
		for k, val := range v.params {
			form.Set(k, val)
		}
		if err := VerifyRequest(pub, form); err != nil {
			t.Errorf("%s: published signature rejected: %v", v.name, err)
		}
		// The notification rule drops sign_type as well, so it must not verify these: the
		// vector tells the two rules apart.
		if VerifyNotifyParams(pub, form) == nil {
			t.Errorf("%s: verified without sign_type in the content", v.name)
		}
		tampered := url.Values{}
		for k, vs := range form {
			tampered[k] = vs
		}
		tampered.Set("app_id", "2019090366875134")
		if VerifyRequest(pub, tampered) == nil {
			t.Errorf("%s: tampered parameters verified", v.name)
		}
		// Empty values take no part: adding one changes nothing.
		withEmpty := url.Values{"empty": {""}}
		for k, vs := range form {
			withEmpty[k] = vs
		}
		if err := VerifyRequest(pub, withEmpty); err != nil {
			t.Errorf("%s: an empty parameter broke verification: %v", v.name, err)
		}
	}
}

func TestSignContentRules(t *testing.T) {
	p := url.Values{
		"timestamp":   {"2024-01-01 12:00:00"},
		"app_id":      {"2014072300007148"},
		"biz_content": {`{"out_trade_no":"X1"}`},
		"method":      {"alipay.trade.query"},
		"charset":     {"utf-8"},
		"format":      {"JSON"},
		"sign_type":   {"RSA2"},
		"version":     {"1.0"},
		"sign":        {"ignored"},
		"empty":       {""},
	}
	want := `app_id=2014072300007148&biz_content={"out_trade_no":"X1"}&charset=utf-8&format=JSON&method=alipay.trade.query&sign_type=RSA2&timestamp=2024-01-01 12:00:00&version=1.0`
	if got := SignContent(p, "sign"); got != want {
		t.Fatalf("request content\n got  %s\n want %s", got, want)
	}
	if got := SignContent(p, "sign", "sign_type"); got != `app_id=2014072300007148&biz_content={"out_trade_no":"X1"}&charset=utf-8&format=JSON&method=alipay.trade.query&timestamp=2024-01-01 12:00:00&version=1.0` {
		t.Fatalf("notify content %s", got)
	}
}

// The refund query's request, as the documentation's example shapes it: the canonical
// string is every parameter but sign, sorted, raw, with biz_content holding out_trade_no,
// out_request_no and query_options (an array: gmt_refund_pay is only sent when asked for).
func TestKnownAnswerRefundQueryRequest(t *testing.T) {
	key := rsaKey(t, 0)
	at := time.Date(2024, 1, 1, 12, 0, 0, 0, platformclient.ChinaTime)
	c, err := New(Config{AppID: "2014072300007148", PrivateKey: key, AlipayPublicKey: &key.PublicKey, Now: func() time.Time { return at.UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.requestParams(MethodRefundQuery, refundQueryBiz{OutTradeNo: "X1", OutRequestNo: "X1-R1", QueryOptions: []string{"gmt_refund_pay"}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `app_id=2014072300007148&biz_content={"out_trade_no":"X1","out_request_no":"X1-R1","query_options":["gmt_refund_pay"]}` +
		`&charset=utf-8&format=JSON&method=alipay.trade.fastpay.refund.query&sign_type=RSA2&timestamp=2024-01-01 12:00:00&version=1.0`
	if got := SignContent(p, "sign"); got != want {
		t.Fatalf("refund query content\n got  %s\n want %s", got, want)
	}
	if err := platformclient.VerifySHA256(&key.PublicKey, []byte(want), p.Get("sign")); err != nil {
		t.Fatalf("sign does not cover the canonical string: %v", err)
	}
	if ResponseNodeName(MethodRefundQuery) != "alipay_trade_fastpay_refund_query_response" {
		t.Fatalf("response node %q", ResponseNodeName(MethodRefundQuery))
	}
}
