// The dashboard's page (report/dashboard/page.html, built into the executable by report/CMakeLists.txt): HTML,
// styles and script in one file, charts drawn as SVG by the script, nothing fetched from outside the machine.
#pragma once

namespace pshard::report::dashboard {

extern const char kPage[];

}  // namespace pshard::report::dashboard
