#include "tiny_trace.h"
#include <check.h>
int main(void) { return 0; }
