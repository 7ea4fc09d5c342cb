// Keeps the softverbs_abi_misc object library non-empty while its files are written.
namespace softverbs::abi {
int abi_misc_anchor = 0;
}
