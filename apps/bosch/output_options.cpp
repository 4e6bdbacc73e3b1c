// SPDX-License-Identifier: Apache-2.0
// --quiet / --verbose (see output_options.hpp).

#include "output_options.hpp"

#include <iostream>
#include <streambuf>

namespace bosch::cli {

namespace {
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};
std::ostream& null_stream() {
  static NullBuffer buffer;
  static std::ostream stream(&buffer);
  return stream;
}
}  // namespace

po::options_description OutputOptions::describe() {
  po::options_description d("Output");
  d.add_options()("quiet,q", flag(&quiet), "print nothing on stderr but errors")(
      "verbose,v", flag(&verbose), "also print per-stage summaries and one line per evaluation");
  return d;
}

Verbosity OutputOptions::verbosity() const noexcept {
  if (quiet) return Verbosity::quiet;
  return verbose ? Verbosity::verbose : Verbosity::normal;
}
std::ostream& OutputOptions::info() const {
  return verbosity() == Verbosity::quiet ? null_stream() : std::cerr;
}
std::ostream& OutputOptions::detail() const {
  return verbosity() == Verbosity::verbose ? std::cerr : null_stream();
}

}  // namespace bosch::cli
