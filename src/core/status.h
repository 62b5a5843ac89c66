// Status and Result are part of the public API (include/ll3/status.h); the library's own code
// includes them from here like every other core header.
#pragma once

#include "ll3/status.h"
