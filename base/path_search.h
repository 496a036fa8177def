// Finding a program on PATH, for the processes that start others.
#ifndef ZTASK_BASE_PATH_SEARCH_H_
#define ZTASK_BASE_PATH_SEARCH_H_

#include <string>

namespace ztask {

// The executable file `program` names on $PATH, or `program` itself when it
// has a slash; empty when there is none.
std::string FindOnPath(const std::string& program);

}  // namespace ztask

#endif  // ZTASK_BASE_PATH_SEARCH_H_
