// Exports rendered again from their committed CSV, with no run files: what the results pages
// (scripts/results-*.sh --render, docs/results/) are made of, so that a page changes only with its
// data (the CTest results_pages_regenerate).
//
//   `export pairs --from-csv FILE`   the tables of an `export pairs --format csv`: per context, how
//       many pairs are resolved, the matrix of gaps (an unresolved one in parentheses), and each
//       unresolved pair's interval and p. The verdicts are decided by rule: the CSV's family (its
//       `family` column), or, for a CSV written before that column, Holm's procedure over the
//       context's testable pairs at 1 − the level its intervals were computed at, checked against
//       its `resolved` column; or a sweep's registered `planned:` family (apply_planned_family).
//   `export table --from-csv FILE`   an `export table --format csv` as the Markdown `export table`
//       prints (format_table), best per column marked by rule.
//   `export table --from-csv FILE --plain`   any CSV as a Markdown table, fields as written.
//   `export table --from-curves LABEL=FILE[@X] ...`   cells read from figure CSVs (`export curves`):
//       each argument one column, LABEL, holding every series' value ± se at the row whose x is X
//       (default: the last row: a loss curve's final validation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/export/csv_read.h"
#include "analysis/export/export_table.h"
#include "analysis/pairwise_gaps.h"

namespace analysis {

struct PairsFromCsv {
  std::vector<PairTable> tables;  // one per context, in the file's order; arms in the file's order
  double level = 0;               // the intervals' level, read back from them (0: no testable pair)
};

// Reads an `export pairs --format csv` (columns context, a, b, gap, se, df, lo, hi, p, resolved,
// seeds; threshold and family when written). Throws harness::InputError naming the file, line and
// column: a missing column, a field that is not a number, intervals at different levels, or a
// `resolved` column that the rule does not give.
PairsFromCsv read_pairs_csv(const CsvFile& csv);

// Markdown, per context: "### At T (kL): r of m pairs resolved", the family the verdicts were
// decided by, the matrix (row − column; arms in the order the CSV ranks them) and the list of the
// pairs not resolved with their intervals. `train_context` (0: unknown) labels contexts as kL.
std::string format_pairs_page(const PairsFromCsv& pairs, int64_t train_context);

// An `export table --format csv` read back as the Table it was written from (the cells' mean, se,
// seeds and window se; "–" where a run does not read a row key); `best` (min | max | none) marks
// each column's best as `export table` does; `title` ends the Markdown's note. Throws
// harness::InputError naming the file: no "<column> mean" column, a column without its se and n.
Table read_table_csv(const CsvFile& csv, const std::string& best, const std::string& title);

// Any CSV as a Markdown table, every field as written.
std::string csv_as_markdown(const CsvFile& csv);

// One column of a table read from a figure CSV: its first column is x, then each series S as the
// columns "S" and "S se" (figure_writer.h).
struct CurvesColumn {
  std::string label;     // the column's header
  CsvFile csv;
  bool last = true;      // the last row, or the row whose x is `x`
  double x = 0;
};
// Parses "LABEL=FILE[@X]" and reads FILE. Throws harness::InputError naming the argument or file.
CurvesColumn parse_curves_column(const std::string& argument);
// A Markdown table: one row per series (in the order the columns' files first name them), one
// column per CurvesColumn, cells "mean ± se" ("–" where a file lacks the series or the value is
// empty), each column's min or max in bold (`best`: min | max | none), then a note naming the files.
// Throws harness::InputError naming the file: no row at x, a series without its "se" column.
std::string curves_table_markdown(const std::vector<CurvesColumn>& columns, const std::string& best);

}  // namespace analysis
