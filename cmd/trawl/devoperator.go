package main

// devOperatorKey is trawl dev's operator key (the operator API,
// docs/operations.md): TRAWL_OPERATOR_KEY, else the one kept in
// <data>/operator-key, else a new random one kept there. trawl dev adds it
// to the ledger as the gate does with TRAWL_OPERATOR_KEY.
func devOperatorKey(dataRoot string) (string, error) {
	return keptKey(dataRoot, "TRAWL_OPERATOR_KEY", "operator-key", "trawl_op_", "operator key")
}
