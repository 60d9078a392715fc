/* SPDX-License-Identifier: BSD-3-Clause */
// The program around the translation units that each include one header of
// dlock/cpp/ alone (tests/header/CMakeLists.txt): they compiled and linked.
int main()
{
	return 0;
}
