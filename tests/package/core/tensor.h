// A header of the consumer's own named like one of ember's: ember's headers
// must never pick it up (they include each other by relative paths), so
// reaching this file is a build error.
#pragma once
#error "tests/package/core/tensor.h (the consumer's own) was included by an ember header"
