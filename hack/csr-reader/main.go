// csr-reader reads certificate requests exactly as kube-apiserver's CSR validation and
// kube-controller-manager's signer do (k8s.io/kubernetes pkg/apis/certificates ParseCSR: the FIRST
// PEM block, which must be of type CERTIFICATE REQUEST, parsed by x509.ParseCertificateRequest).
// It is the Go half of oscar's differential test (controller/identity/request.differential.test.ts):
// one input per line on stdin (base64 of the raw bytes), one JSON object per line on stdout, so one
// process answers many inputs.
package main

import (
	"bufio"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
)

type attribute struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type reading struct {
	OK         bool        `json:"ok"`
	Error      string      `json:"error,omitempty"`
	Subject    []attribute `json:"subject,omitempty"`
	Extensions []string    `json:"extensions,omitempty"`
	SANs       int         `json:"sans"`
	Signature  bool        `json:"signatureValid"`
}

func read(raw []byte) reading {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return reading{Error: "PEM block type must be CERTIFICATE REQUEST"}
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return reading{Error: err.Error()}
	}
	out := reading{OK: true, Subject: []attribute{}, Extensions: []string{}}
	for _, name := range csr.Subject.Names {
		value, _ := name.Value.(string)
		out.Subject = append(out.Subject, attribute{Type: name.Type.String(), Value: value})
	}
	for _, ext := range csr.Extensions {
		out.Extensions = append(out.Extensions, ext.Id.String())
	}
	out.SANs = len(csr.DNSNames) + len(csr.EmailAddresses) + len(csr.IPAddresses) + len(csr.URIs)
	out.Signature = csr.CheckSignature() == nil
	return out
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		raw, err := base64.StdEncoding.DecodeString(in.Text())
		if err != nil {
			_ = enc.Encode(reading{Error: "csr-reader: bad input line: " + err.Error()})
		} else {
			_ = enc.Encode(read(raw))
		}
		_ = out.Flush()
	}
}
