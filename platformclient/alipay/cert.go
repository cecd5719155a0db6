package alipay

import (
	"bytes"
	"crypto/md5"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// CertSN is the serial Alipay knows a certificate by (app_cert_sn, alipay_cert_sn): the
// lower-case hex MD5 of the issuer name followed by the serial number in decimal. The
// issuer is written as the official Java SDK writes it with
// getIssuerX500Principal().getName(): RFC 2253, last RDN first, k=v joined by ','.
func CertSN(c *x509.Certificate) string {
	name, err := javaRFC2253(c.RawIssuer)
	if err != nil {
		// x509.ParseCertificate already parsed this issuer, so this cannot happen; Go's own
		// rendering agrees with Java's for the names Alipay issues.
		name = c.Issuer.String()
	}
	return snOf(name, c.SerialNumber)
}

// RootCertSN is alipay_root_cert_sn: the SNs of the RSA-signed certificates of
// alipayRootCert.crt joined with '_', in file order. Like the official Java SDK it keeps
// every certificate whose signature algorithm is in the PKCS#1 RSA family (sha1WithRSA,
// sha256WithRSA, ...) and skips the others (SM2, ECDSA). Those others are parsed only as
// far as the SN needs, because Go's x509 package refuses SM2 keys.
func RootCertSN(pemChain []byte) (string, error) {
	var sns []string
	rest := pemChain
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return "", fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n, block.Type)
		}
		c, err := parseCertSNFields(block.Bytes)
		if err != nil {
			return "", fmt.Errorf("certificate %d: %w", n, err)
		}
		if !isPKCS1Signature(c.SignatureAlgorithm.Algorithm) {
			continue
		}
		name, err := javaRFC2253(c.TBS.Issuer.FullBytes)
		if err != nil {
			return "", fmt.Errorf("certificate %d: unreadable issuer name", n)
		}
		sns = append(sns, snOf(name, c.TBS.SerialNumber))
	}
	if len(sns) == 0 {
		if bytes.Contains(pemChain, []byte("-----BEGIN")) {
			return "", errors.New("no RSA-signed certificate in the chain (is this alipayRootCert.crt?)")
		}
		return "", errors.New("not a PEM certificate chain")
	}
	return strings.Join(sns, "_"), nil
}

// ParseCertificate reads the first certificate of a PEM file (an Alipay .crt may hold the
// issuing CA after it) or a DER certificate. Its errors say what is wrong with the file and
// never quote it: a private key pasted into the wrong setting must not reach a log.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty file")
	}
	der := data // untrimmed: DER may well end in a byte that looks like a space
	if bytes.Contains(trimmed, []byte("-----BEGIN")) {
		block, _ := pem.Decode(trimmed)
		if block == nil {
			return nil, errors.New("malformed PEM")
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block is %q, want CERTIFICATE", block.Type)
		}
		der = block.Bytes
	} else if data[0] != 0x30 { // DER starts with a SEQUENCE
		return nil, errors.New("neither PEM nor DER")
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		// The parser's message may quote the bytes it choked on: keep it out.
		return nil, errors.New("not a valid X.509 certificate")
	}
	return c, nil
}

// certPublicKey is the RSA key of a certificate that must verify RSA2 signatures.
func certPublicKey(c *x509.Certificate) (*rsa.PublicKey, error) {
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("certificate key is %s, want RSA (RSA2 signatures)", c.PublicKeyAlgorithm)
	}
	return pub, nil
}

func snOf(issuer string, serial *big.Int) string {
	if serial == nil {
		serial = new(big.Int)
	}
	sum := md5.Sum([]byte(issuer + serial.String()))
	return hex.EncodeToString(sum[:])
}

// oidPKCS1 is 1.2.840.113549.1.1, the arc of the RSA PKCS#1 algorithms; the Java SDK keeps
// a root certificate whose signature algorithm OID starts with it.
var oidPKCS1 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1}

func isPKCS1Signature(oid asn1.ObjectIdentifier) bool {
	return len(oid) > len(oidPKCS1) && oid[:len(oidPKCS1)].Equal(oidPKCS1)
}

// snCertificate is as much of an X.509 certificate as the SN needs.
type snCertificate struct {
	TBS                snTBSCertificate
	SignatureAlgorithm algorithmIdentifier
	Signature          asn1.BitString
}

type snTBSCertificate struct {
	Raw             asn1.RawContent
	Version         int `asn1:"optional,explicit,default:0,tag:0"`
	SerialNumber    *big.Int
	Signature       asn1.RawValue
	Issuer          asn1.RawValue
	Validity        asn1.RawValue
	Subject         asn1.RawValue
	PublicKey       asn1.RawValue
	IssuerUniqueID  asn1.BitString `asn1:"optional,tag:1"`
	SubjectUniqueID asn1.BitString `asn1:"optional,tag:2"`
	Extensions      asn1.RawValue  `asn1:"optional,explicit,tag:3"`
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

func parseCertSNFields(der []byte) (snCertificate, error) {
	var c snCertificate
	rest, err := asn1.Unmarshal(der, &c)
	if err != nil || len(rest) != 0 || c.TBS.SerialNumber == nil {
		return snCertificate{}, errors.New("not a valid X.509 certificate")
	}
	return c, nil
}

// attributeTypeAndValue keeps the raw value: Java writes values that are not strings as
// '#' and the hex of their DER encoding.
type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// relativeDistinguishedNameSET is one RDN (a SET: the name ends in SET for encoding/asn1).
type relativeDistinguishedNameSET []attributeTypeAndValue

// rfc2253Keywords are the only attribute names Java's RFC 2253 output spells out; every
// other attribute (emailAddress, serialNumber, ...) appears as its dotted OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// javaRFC2253 renders a DER Name exactly as Java's X500Principal.getName() does.
func javaRFC2253(rawName []byte) (string, error) {
	var rdns []relativeDistinguishedNameSET
	rest, err := asn1.Unmarshal(rawName, &rdns)
	if err != nil || len(rest) != 0 {
		return "", errors.New("malformed name")
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(rdns[i]))
		for _, ava := range rdns[i] {
			avas = append(avas, javaAVA(ava))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

// javaDirectoryString reports the ASN.1 string types Java prints as text (PrintableString,
// T61String, IA5String, GeneralString, BMPString, UTF8String).
func javaDirectoryString(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}

func javaAVA(ava attributeTypeAndValue) string {
	key, ok := rfc2253Keywords[ava.Type.String()]
	if !ok || !javaDirectoryString(ava.Value) {
		if !ok {
			key = ava.Type.String()
		}
		return key + "=#" + hex.EncodeToString(ava.Value.FullBytes)
	}
	// Java decodes every one of those string types' content bytes as UTF-8 (so a BMPString
	// comes out garbled there too: the SN must match, not look right).
	const escapees = ",=+<>#;\"\\"
	var b strings.Builder
	for _, r := range string(ava.Value.Bytes) {
		switch {
		case strings.ContainsRune(escapees, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString("\\00")
		default:
			b.WriteRune(r)
		}
	}
	// Leading and trailing spaces (and CRs) are escaped too.
	v := []rune(b.String())
	lead := 0
	for lead < len(v) && (v[lead] == ' ' || v[lead] == '\r') {
		lead++
	}
	trail := len(v) - 1
	for trail >= 0 && (v[trail] == ' ' || v[trail] == '\r') {
		trail--
	}
	var out strings.Builder
	out.WriteString(key)
	out.WriteByte('=')
	for i, r := range v {
		if i < lead || i > trail {
			out.WriteByte('\\')
		}
		out.WriteRune(r)
	}
	return out.String()
}
