"""Counts a run of IPython Parallel's suite (its JUnit XML report): the
tests of the public API that pass, out of those that ran, leaving out
those machinery.txt lists (IPython Parallel's own machinery), skips and the
suite's own expected failures. Prints every public-API test that failed.

usage: count.py REPORT.xml MACHINERY.txt
"""

import sys
import xml.etree.ElementTree as ET


def machinery(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                out.append(line.split()[0])
    return out


def node_id(case):
    # classname: ipyparallel.tests.test_view.TestView -> test_view.py::TestView;
    # a file that failed to import has none, and its module as name.
    if not case.get("classname"):
        return case.get("name", "").rsplit(".", 1)[-1] + ".py"
    parts = case.get("classname").split(".")
    module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    path = parts[module] + ".py"
    return "::".join([path] + parts[module + 1:] + [case.get("name")])


def main(report, listing):
    out_of = machinery(listing)
    counted = {"passed": [], "failed": [], "machinery": [], "skipped": [], "xfail": []}
    for case in ET.parse(report).getroot().iter("testcase"):
        test = node_id(case)
        if any(test == m or test.startswith(m + "::") or (m.endswith(".py") and test.split("::")[0] == m)
               for m in out_of):
            counted["machinery"].append(test)
            continue
        kinds = {child.tag for child in case}
        skipped = case.find("skipped")
        if skipped is not None:
            xfail = "xfail" in (skipped.get("type", "") + skipped.get("message", ""))
            counted["xfail" if xfail else "skipped"].append(test)
        elif kinds & {"failure", "error"}:
            counted["failed"].append(test)
        else:
            counted["passed"].append(test)
    ran = len(counted["passed"]) + len(counted["failed"])
    print("public API: %d of %d pass (%.1f%%); %d counted out as machinery, %d skipped, %d expected failures"
          % (len(counted["passed"]), ran, 100.0 * len(counted["passed"]) / max(ran, 1), len(counted["machinery"]),
             len(counted["skipped"]), len(counted["xfail"])))
    for test in counted["failed"]:
        print("  failed: %s" % test)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
