package render_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// manyFindings is sampleReport with n findings spread over its three days, the summary's
// count saying so.
func manyFindings(n int) reconcile.Report {
	rep := sampleReport()
	list := make(reconcile.FindingList, n)
	for i := range list {
		local, plat := int64(100000+i), int64(100000)
		list[i] = reconcile.Finding{ID: int64(i + 1), Kind: reconcile.MismatchAmount, Platform: reconcile.Alipay,
			MerchantID: "2021000000000001", OutTradeNo: fmt.Sprintf("ORDER-%07d", i+1), PlatformTradeNo: "2026112622001400001234567890",
			LocalAmountMinor: &local, PlatformAmountMinor: &plat, SeenCount: 1, ReviewStatus: reconcile.ReviewOpen, EvidenceVersion: 1,
			FirstSeenAt: rep.From.Add(time.Duration(i) * 72 * time.Hour / time.Duration(n))}
		list[i].LastSeenAt = list[i].FirstSeenAt
	}
	rep.Findings, rep.Totals.Count = list, int64(n)
	return rep
}

// countingSource counts the findings the renderer has asked for.
type countingSource struct {
	reconcile.FindingList
	pulled int
}

func (c *countingSource) Each(fn func(reconcile.Finding) error) error {
	return c.FindingList.Each(func(f reconcile.Finding) error {
		c.pulled++
		return fn(f)
	})
}

// failingWriter takes room bytes, then fails every write.
type failingWriter struct{ room int }

var errFull = errors.New("the client went away")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.room {
		n := w.room
		w.room = 0
		return n, errFull
	}
	w.room -= len(p)
	return len(p), nil
}

// TestReportStopsReadingWhenTheWriterFails: CSV, JSON and HTML write each finding as it is
// read, so a writer that fails after 256 KiB stops the reading long before the 20,000th
// finding (a renderer that read them all first would ask for every one). XLSX writes its
// zip only at the end, so it reads them all (fewer here), but it too returns the writer's
// error.
func TestReportStopsReadingWhenTheWriterFails(t *testing.T) {
	t.Parallel()
	for _, format := range render.ReportFormats {
		n, room := 20000, 256<<10
		if format == "xlsx" {
			n, room = 2000, 4<<10
		}
		rep := manyFindings(n)
		src := &countingSource{FindingList: rep.Findings.(reconcile.FindingList)}
		rep.Findings = src
		doc := render.ReportDoc{Report: rep, Loc: shanghai, Generated: rep.To, Lang: render.LangEN}
		err := doc.Write(&failingWriter{room: room}, format)
		if !errors.Is(err, errFull) {
			t.Errorf("%s: %v, want the writer's error", format, err)
		}
		if format != "xlsx" && src.pulled >= n/4 {
			t.Errorf("%s: read %d of %d findings for 256 KiB of output", format, src.pulled, n)
		}
		t.Logf("%s: read %d of %d findings", format, src.pulled, n)
	}
}

// TestReportJSONIsOneIndentedDocument: the JSON written a finding at a time is exactly the
// indented document WriteJSON would write of the whole (same layout, same field names, in
// order), with every finding, and an empty list is [].
func TestReportJSONIsOneIndentedDocument(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3} {
		rep := manyFindings(n)
		var buf bytes.Buffer
		if err := (render.ReportDoc{Report: rep, Loc: shanghai, Generated: rep.To}).Write(&buf, "json"); err != nil {
			t.Fatal(err)
		}
		var compact, indented bytes.Buffer
		if err := json.Compact(&compact, buf.Bytes()); err != nil {
			t.Fatalf("%d findings: not JSON: %v\n%s", n, err, buf.Bytes())
		}
		if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if indented.String()+"\n" != buf.String() {
			t.Errorf("%d findings: not laid out as WriteJSON would:\n%s", n, buf.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
		var keys []string
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		dec.Token() //nolint:errcheck // the opening brace
		for dec.More() {
			k, _ := dec.Token()
			keys = append(keys, k.(string))
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		want := "from to timezone generated_at summary totals findings runs run_totals statements audit"
		if strings.Join(keys, " ") != want {
			t.Errorf("keys %q, want %q", keys, want)
		}
		// The review moves, streamed like the findings, times in the report's zone.
		var audit []reconcile.ReportAuditEntry
		if err := json.Unmarshal(doc["audit"], &audit); err != nil || len(audit) != 2 || audit[0].Action != "propose" ||
			audit[0].OutTradeNo == "" || !strings.Contains(string(doc["audit"]), `"created_at": "2026-11-28T03:00:00+08:00"`) {
			t.Errorf("audit %s (%v): want the sample's two moves", doc["audit"], err)
		}
		var findings []render.FindingView
		if err := json.Unmarshal(doc["findings"], &findings); err != nil || len(findings) != n {
			t.Fatalf("%d findings: %d decoded (%v): %s", n, len(findings), err, doc["findings"])
		}
		if n > 0 && (findings[n-1].OutTradeNo != fmt.Sprintf("ORDER-%07d", n) || findings[0].AtStake != "0.00") {
			t.Errorf("findings %+v", findings)
		}
		if n == 0 && !bytes.Contains(buf.Bytes(), []byte(`"findings": [],`)) {
			t.Errorf("no findings: %s", doc["findings"])
		}
	}
}

// TestReportXLSXStreamsALongSheet: past the rows that set the column widths, the findings
// sheet goes on streaming: every finding is a row, in order, amounts numbers, and the
// autofilter and frozen header cover the whole table.
func TestReportXLSXStreamsALongSheet(t *testing.T) {
	t.Parallel()
	const n = 2500
	rep := manyFindings(n)
	var buf bytes.Buffer
	if err := (render.ReportDoc{Report: rep, Loc: shanghai, Generated: rep.To}).Write(&buf, "xlsx"); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sheet := render.Label(render.LangEN, "report.sheet.findings")
	rows, err := f.Rows(sheet)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for rows.Next() {
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		if count > 0 && cols[4] != fmt.Sprintf("ORDER-%07d", count) {
			t.Fatalf("row %d: %q", count+1, cols)
		}
		count++
	}
	if count != n+1 {
		t.Fatalf("%d rows, want the header and %d findings", count, n)
	}
	last := fmt.Sprintf("G%d", n+1)
	if raw, _ := f.GetCellValue(sheet, last, excelize.Options{RawCellValue: true}); raw != "1024.99" {
		t.Errorf("%s holds %q, want the number 1024.99", last, raw)
	}
	if typ, _ := f.GetCellType(sheet, last); typ != excelize.CellTypeUnset && typ != excelize.CellTypeNumber {
		t.Errorf("%s is of type %v, want a number", last, typ)
	}
	for _, d := range f.GetDefinedName() {
		if d.Name == "_xlnm._FilterDatabase" && d.Scope == sheet && !strings.HasSuffix(d.RefersTo, fmt.Sprintf("$A$1:$W$%d", n+1)) {
			t.Errorf("autofilter over %s", d.RefersTo)
		}
	}
	if panes, err := f.GetPanes(sheet); err != nil || !panes.Freeze || panes.YSplit != 1 {
		t.Errorf("panes %+v (%v)", panes, err)
	}
}
