package alipay

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Published SNs of published test certificates (see testdata/README.md).
func TestCertSNKnownAnswers(t *testing.T) {
	appPEM, err := os.ReadFile("testdata/gopay_appCertPublicKey.crt")
	if err != nil {
		t.Fatal(err)
	}
	app, err := ParseCertificate(appPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := CertSN(app), "4498aaa8ab0c8986c15c41b36186db7d"; got != want {
		t.Errorf("app cert SN %s, want %s", got, want)
	}

	// A real Alipay-issued certificate with no published SN: openssl agrees with us.
	javaPEM, err := os.ReadFile("testdata/alipay-sdk-java-all_appCertPublicKey_2019091767145019.crt")
	if err != nil {
		t.Fatal(err)
	}
	javaCert, err := ParseCertificate(javaPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := CertSN(javaCert), opensslSN(t, javaPEM); got != want {
		t.Errorf("Java SDK fixture SN %s, openssl says %s", got, want)
	}

	rootPEM, err := os.ReadFile("testdata/gopay_alipayRootCert.crt")
	if err != nil {
		t.Fatal(err)
	}
	// The production root chain starts with an SM2 certificate, which Go's x509 refuses:
	// RootCertSN must not need it parsed.
	root, err := RootCertSN(rootPEM)
	if err != nil {
		t.Fatal(err)
	}
	if want := "687b59193f3f462dd5336e5abf83c5d8_02941eef3187dddf3d3b83462e1dfcf6"; root != want {
		t.Errorf("root cert SN %s, want %s", root, want)
	}
}

var (
	testKeyOnce sync.Once
	testKeys    [3]*rsa.PrivateKey
)

// rsaKey returns one of three keys generated once per test binary (1024 bits: these tests
// are about names and serials, not key strength).
func rsaKey(t *testing.T, i int) *rsa.PrivateKey {
	t.Helper()
	testKeyOnce.Do(func() {
		for j := range testKeys {
			k, err := rsa.GenerateKey(rand.Reader, 1024)
			if err != nil {
				panic(err)
			}
			testKeys[j] = k
		}
	})
	return testKeys[i]
}

// mkCert signs tmpl with parent's key (self-signed when parent is nil) and returns its PEM.
func mkCert(t *testing.T, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, *x509.Certificate) {
	t.Helper()
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), c
}

// opensslSN computes a certificate's SN from what the openssl command says about it: the
// issuer in RFC 2253 form and the hex serial, turned to decimal and hashed here.
func opensslSN(t *testing.T, certPEM []byte) string {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl not on PATH: install it (apt-get install openssl) to cross-check certificate SNs")
	}
	path := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(path, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "x509", "-in", path, "-noout", "-issuer", "-nameopt", "RFC2253", "-serial").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v %s", err, out)
	}
	var issuer, serialHex string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if v, ok := strings.CutPrefix(line, "issuer="); ok {
			issuer = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "serial="); ok {
			serialHex = strings.TrimSpace(v)
		}
	}
	serial, ok := new(big.Int).SetString(serialHex, 16)
	if issuer == "" || !ok {
		t.Fatalf("cannot read openssl output %q", out)
	}
	sum := md5.Sum([]byte(javaAVAOrder(issuer) + serial.String()))
	return hex.EncodeToString(sum[:])
}

// javaAVAOrder undoes the one difference between openssl's RFC 2253 output and Java's for
// the names tested here: openssl reverses its flat list of entries, so the AVAs inside a
// multi-valued RDN come out reversed too, while Java keeps their encoded order.
func javaAVAOrder(name string) string {
	rdns := splitUnescaped(name, ',')
	for i, rdn := range rdns {
		avas := splitUnescaped(rdn, '+')
		for l, r := 0, len(avas)-1; l < r; l, r = l+1, r-1 {
			avas[l], avas[r] = avas[r], avas[l]
		}
		rdns[i] = strings.Join(avas, "+")
	}
	return strings.Join(rdns, ",")
}

func splitUnescaped(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // the escaped character belongs to the value
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// multiValuedRDN is a subject with a multi-valued RDN (CN+OU in one SET), which pkix.Name
// cannot express.
func multiValuedRDN(t *testing.T) []byte {
	t.Helper()
	raw, err := asn1.Marshal([]relativeDistinguishedNameSET{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 6}, Value: printable("CN")}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: utf8String("Ant Financial (sandbox)")}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: utf8String("Multi CA")}, {Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: utf8String("Unit 7")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestCertSNMatchesOpenSSL(t *testing.T) {
	caKey, leafKey := rsaKey(t, 0), rsaKey(t, 1)
	bigSerial, _ := new(big.Int).SetString("20190917040718520148253697650", 10)
	cas := map[string]*x509.Certificate{
		"multi-RDN issuer with escapes": {
			SerialNumber: big.NewInt(1),
			Subject: pkix.Name{Country: []string{"CN"}, Province: []string{"Zhejiang"}, Locality: []string{"Hangzhou"},
				Organization: []string{"Alipay, Inc. (sandbox)"}, OrganizationalUnit: []string{"R&D + Ops"},
				CommonName: `Sandbox "Class 2" CA <R1>; test`},
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		},
		"multi-valued RDN issuer": {
			SerialNumber: big.NewInt(2), RawSubject: multiValuedRDN(t),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		},
	}
	for name, caTmpl := range cas {
		t.Run(name, func(t *testing.T) {
			_, ca := mkCert(t, caTmpl, nil, &caKey.PublicKey, caKey)
			for _, serial := range []*big.Int{big.NewInt(255), bigSerial} {
				leafPEM, leaf := mkCert(t, &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "2021000122600001"}},
					ca, &leafKey.PublicKey, caKey)
				if got, want := CertSN(leaf), opensslSN(t, leafPEM); got != want {
					t.Errorf("serial %s: SN %s, openssl says %s", serial, got, want)
				}
				parsed, err := ParseCertificate(leafPEM)
				if err != nil || CertSN(parsed) != CertSN(leaf) {
					t.Fatalf("ParseCertificate: %v", err)
				}
			}
		})
	}

	t.Run("root chain skips non-RSA certificates", func(t *testing.T) {
		rsaRootPEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(0x1fcfa18d6a480d11),
			Subject: pkix.Name{Country: []string{"CN"}, Organization: []string{"Ant Financial"}, OrganizationalUnit: []string{"Certification Authority"},
				CommonName: "Sandbox Root R1"}, IsCA: true, BasicConstraintsValid: true}, nil, &caKey.PublicKey, caKey)
		ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ecRootPEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "Sandbox Root E1"},
			IsCA: true, BasicConstraintsValid: true}, nil, &ecKey.PublicKey, ecKey)
		// The Java SDK keeps every PKCS#1 RSA signature algorithm, not only SHA-1/SHA-256.
		sha384PEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(4), Subject: pkix.Name{CommonName: "Sandbox Root R2"},
			SignatureAlgorithm: x509.SHA384WithRSA, IsCA: true, BasicConstraintsValid: true}, nil, &leafKey.PublicKey, leafKey)

		chain := bytes.Join([][]byte{ecRootPEM, rsaRootPEM, ecRootPEM, sha384PEM}, []byte("\n"))
		got, err := RootCertSN(chain)
		if err != nil {
			t.Fatal(err)
		}
		if want := opensslSN(t, rsaRootPEM) + "_" + opensslSN(t, sha384PEM); got != want {
			t.Errorf("root SN %s, want %s", got, want)
		}
		if _, err := RootCertSN(ecRootPEM); err == nil || !strings.Contains(err.Error(), "no RSA") {
			t.Errorf("a chain without RSA certificates: %v", err)
		}
	})
}

func printable(s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagPrintableString, Bytes: []byte(s)}
}

func utf8String(s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagUTF8String, Bytes: []byte(s)}
}

func ia5(s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagIA5String, Bytes: []byte(s)}
}

// The corners where Java's getName() differs from openssl's RFC 2253 output, written out
// by the rules of OpenJDK's AVA.toRFC2253String.
func TestJavaRFC2253Name(t *testing.T) {
	oid := func(arcs ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(arcs) }
	cn := oid(2, 5, 4, 3)
	cases := []struct {
		name string
		rdns []relativeDistinguishedNameSET
		want string
	}{
		{"last RDN first", []relativeDistinguishedNameSET{{{oid(2, 5, 4, 6), printable("CN")}}, {{oid(2, 5, 4, 10), utf8String("Ant Financial")}}},
			"O=Ant Financial,C=CN"},
		{"emailAddress is an OID with the DER in hex", []relativeDistinguishedNameSET{{{oid(1, 2, 840, 113549, 1, 9, 1), ia5("a@b.c")}}},
			"1.2.840.113549.1.9.1=#16056140622e63"},
		{"serialNumber too", []relativeDistinguishedNameSET{{{oid(2, 5, 4, 5), printable("123")}}}, "2.5.4.5=#1303313233"},
		{"DC and UID are keywords", []relativeDistinguishedNameSET{{{oid(0, 9, 2342, 19200300, 100, 1, 25), ia5("com")}},
			{{oid(0, 9, 2342, 19200300, 100, 1, 1), utf8String("u1")}}}, "UID=u1,DC=com"},
		{"'#' and '=' escaped anywhere", []relativeDistinguishedNameSET{{{cn, utf8String("a#b=c")}}}, `CN=a\#b\=c`},
		{"leading and trailing spaces", []relativeDistinguishedNameSET{{{cn, utf8String(" x ")}}}, `CN=\ x\ `},
		{"non-ASCII kept as is", []relativeDistinguishedNameSET{{{cn, utf8String("支付宝(中国)")}}}, "CN=支付宝(中国)"},
		{"a keyword with a non-string value", []relativeDistinguishedNameSET{{{cn, asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagInteger, Bytes: []byte{7}}}}},
			"CN=#020107"},
	}
	for _, c := range cases {
		raw, err := asn1.Marshal(c.rdns)
		if err != nil {
			t.Fatal(err)
		}
		got, err := javaRFC2253(raw)
		if err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.name, got, err, c.want)
		}
	}
}

func TestParseCertificateErrorsNeverQuoteTheFile(t *testing.T) {
	key := rsaKey(t, 2)
	keyPEM, err := platformclient.EncodePrivateKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, cert := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "x"}}, nil, &key.PublicKey, key)
	block, _ := pem.Decode(certPEM)
	if c, err := ParseCertificate(block.Bytes); err != nil || CertSN(c) != CertSN(cert) {
		t.Fatalf("DER certificate: %v", err)
	}
	corrupt := bytes.Replace(certPEM, []byte("MII"), []byte("MIA"), 1)
	for name, data := range map[string][]byte{
		"empty": nil, "private key": keyPEM, "garbage": []byte("hello"), "corrupt": corrupt,
		"truncated PEM": certPEM[:len(certPEM)/2],
	} {
		_, err := ParseCertificate(data)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		body := strings.ReplaceAll(string(keyPEM[40:len(keyPEM)-40]), "\n", "")
		if strings.Contains(err.Error(), body[100:140]) || strings.Contains(err.Error(), "MII") {
			t.Errorf("%s: error quotes the file: %v", name, err)
		}
		if name == "private key" && !strings.Contains(err.Error(), `"PRIVATE KEY", want CERTIFICATE`) {
			t.Errorf("private key: error %q does not say what is wrong", err)
		}
	}
}

func TestNewCertModeErrorsNameTheField(t *testing.T) {
	key := rsaKey(t, 0)
	rsaPEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "r"}}, nil, &key.PublicKey, key)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "e"}}, nil, &ecKey.PublicKey, ecKey)
	keyPEM, _ := platformclient.EncodePrivateKeyPEM(key)

	m, err := NewCertMode(rsaPEM, rsaPEM, rsaPEM)
	if err != nil {
		t.Fatal(err)
	}
	if m.AlipayCerts[m.AlipayCertSN] == nil || m.AppCertSN == "" || m.RootCertSN != m.AppCertSN {
		t.Fatalf("cert mode %+v", m)
	}
	for _, c := range []struct {
		app, alipay, root []byte
		prefix            string
	}{
		{keyPEM, rsaPEM, rsaPEM, "app_cert_file: "},
		{rsaPEM, []byte("junk"), rsaPEM, "alipay_cert_file: "},
		{rsaPEM, ecPEM, rsaPEM, "alipay_cert_file: certificate key is ECDSA"},
		{rsaPEM, rsaPEM, ecPEM, "alipay_root_cert_file: no RSA"},
		{rsaPEM, rsaPEM, keyPEM, "alipay_root_cert_file: "},
	} {
		_, err := NewCertMode(c.app, c.alipay, c.root)
		if err == nil || !strings.HasPrefix(err.Error(), c.prefix) {
			t.Errorf("error %v, want prefix %q", err, c.prefix)
		}
	}
}

func TestConfigCertMode(t *testing.T) {
	key := rsaKey(t, 0)
	certPEM, _ := mkCert(t, &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "c"}}, nil, &key.PublicKey, key)
	m, err := NewCertMode(certPEM, certPEM, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	// Certificate mode needs no Alipay public key.
	cfg := Config{AppID: "2021000000000001", PrivateKey: key, Cert: m}
	if _, err := New(cfg); err != nil {
		t.Fatalf("cert mode without AlipayPublicKey: %v", err)
	}
	s := fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)
	if !strings.Contains(s, "Mode:certificate(app_cert_sn="+m.AppCertSN) || strings.Contains(s, "BEGIN") {
		t.Fatalf("String: %s", s)
	}
	if s := (Config{}).String(); !strings.Contains(s, "Mode:public-key") {
		t.Fatalf("String: %s", s)
	}
	for name, bad := range map[string]*CertMode{
		"no SNs":            {AlipayCerts: m.AlipayCerts},
		"no Alipay cert":    {AppCertSN: "a", RootCertSN: "r"},
		"ambiguous current": {AppCertSN: "a", RootCertSN: "r", AlipayCerts: map[string]*rsa.PublicKey{"x": &key.PublicKey, "y": &key.PublicKey}},
		"current not held":  {AppCertSN: "a", RootCertSN: "r", AlipayCertSN: "z", AlipayCerts: map[string]*rsa.PublicKey{"x": &key.PublicKey}},
	} {
		if _, err := New(Config{AppID: "2021000000000001", PrivateKey: key, Cert: bad}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// One certificate and no AlipayCertSN: that one is current.
	one := &CertMode{AppCertSN: "a", RootCertSN: "r", AlipayCerts: map[string]*rsa.PublicKey{"x": &key.PublicKey}}
	if _, err := New(Config{AppID: "2021000000000001", PrivateKey: key, Cert: one}); err != nil || one.defaultSN() != "x" {
		t.Fatalf("single certificate: %v", err)
	}
	if _, err := New(Config{AppID: "2021000000000001", PrivateKey: key}); err == nil || !strings.Contains(err.Error(), SettingPublicKey) {
		t.Fatalf("public-key mode without a public key: %v", err)
	}
}

// Envelope.CertSN is read from beside sign, and the node stays byte-exact.
func TestExtractResponseCertSN(t *testing.T) {
	body := []byte(`{"alipay_trade_query_response":{"code":"10000","msg":"Success"},"alipay_cert_sn":"abc123","sign":"c2ln"}`)
	env, err := ExtractResponse(body, MethodTradeQuery)
	if err != nil || env.CertSN != "abc123" || env.Sign != "c2ln" || string(env.Node) != `{"code":"10000","msg":"Success"}` {
		t.Fatalf("%+v %v", env, err)
	}
	if _, err := ExtractResponse([]byte(`{"alipay_trade_query_response":{},"alipay_cert_sn":7}`), MethodTradeQuery); err == nil {
		t.Fatal("a numeric alipay_cert_sn was accepted")
	}
}

// Which key verifies an answer in certificate mode: the one its alipay_cert_sn names, the
// configured one when it names none; an SN not held is KindConfig naming it.
func TestCertModeAnswerKeySelection(t *testing.T) {
	app, current, older := rsaKey(t, 0), rsaKey(t, 1), rsaKey(t, 2)
	node := `{"code":"10000","msg":"Success","out_trade_no":"K1","trade_no":"2024","trade_status":"WAIT_BUYER_PAY","total_amount":"1.00"}`
	var (
		mu       sync.Mutex
		signWith *rsa.PrivateKey
		certSN   string
		sent     url.Values
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		defer mu.Unlock()
		sent = r.PostForm
		sig, _ := platformclient.SignSHA256(signWith, []byte(node))
		sn := ""
		if certSN != "" {
			sn = `,"alipay_cert_sn":"` + certSN + `"`
		}
		_, _ = io.WriteString(w, `{"alipay_trade_query_response":`+node+sn+`,"sign":"`+sig+`"}`)
	}))
	defer srv.Close()
	c, err := New(Config{Gateway: srv.URL, AppID: "2021000000000001", PrivateKey: app, MaxRetries: -1,
		Cert: &CertMode{AppCertSN: "appsn", RootCertSN: "r1_r2", AlipayCertSN: "current",
			AlipayCerts: map[string]*rsa.PublicKey{"current": &current.PublicKey, "older": &older.PublicKey}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		key    *rsa.PrivateKey
		sn     string
		want   reconcile.PlatformErrorKind // 0: a result
		inText string
	}{
		{"named SN", older, "older", 0, ""},
		{"no SN: the configured certificate", current, "", 0, ""},
		{"no SN, signed by another held certificate", older, "", reconcile.KindBadSignature, ""},
		{"named SN, signed by another key", current, "older", reconcile.KindBadSignature, ""},
		{"unknown SN", current, "rotated-sn-42", reconcile.KindConfig, "rotated-sn-42"},
	} {
		mu.Lock()
		signWith, certSN = tc.key, tc.sn
		mu.Unlock()
		res, err := c.Query(context.Background(), "K1")
		if got := reconcile.PlatformErrorKindOf(err); got != tc.want || (tc.want == 0) != (res.State == reconcile.StateOpen) {
			t.Errorf("%s: %+v, %v", tc.name, res, err)
		}
		if tc.inText != "" && !strings.Contains(fmt.Sprint(err), tc.inText) {
			t.Errorf("%s: error does not name the SN: %v", tc.name, err)
		}
		mu.Lock()
		if sent.Get("app_cert_sn") != "appsn" || sent.Get("alipay_root_cert_sn") != "r1_r2" || VerifyRequest(&app.PublicKey, sent) != nil {
			t.Errorf("%s: request carried %q %q or its sign does not cover them", tc.name, sent.Get("app_cert_sn"), sent.Get("alipay_root_cert_sn"))
		}
		mu.Unlock()
	}
}
