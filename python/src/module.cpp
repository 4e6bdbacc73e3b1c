// SPDX-License-Identifier: Apache-2.0
// The extension module bosch._bosch (re-exported by the bosch package).

#include "convert.hpp"
#include "masks.hpp"
#include "options.hpp"
#include "processes.hpp"
#include "search.hpp"
#include "transformer.hpp"

#include <bosch/version.hpp>

NB_MODULE(_bosch, m) {
  m.doc() =
      "bosch: training-free selection of sliding-window attention heads (BOSCH), the C++ search "
      "core and the bundled transformer evaluator.";
  m.attr("__version__") = bosch::version_string;
  m.attr("version") = bosch::version_string;  // the same; dunder names are left out of the stubs
  bosch::python::register_errors(m);
  bosch::python::bind_masks(m);
  bosch::python::bind_options(m);
  bosch::python::bind_search(m);
  bosch::python::bind_transformer(m);
  bosch::python::bind_processes(m);
}
