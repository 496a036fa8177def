// The page's files, built into taskdash (dashboard/assets/, embedded by
// cmake/embed.cmake), so that it serves with no files around it and the
// page needs no network.
#ifndef ZTASK_DASHBOARD_ASSETS_H_
#define ZTASK_DASHBOARD_ASSETS_H_

#include <string_view>

namespace ztask::dashboard {

extern const std::string_view kIndexHtml;
extern const std::string_view kAppJs;
extern const std::string_view kAppCss;
extern const std::string_view kFavicon;

}  // namespace ztask::dashboard

#endif  // ZTASK_DASHBOARD_ASSETS_H_
