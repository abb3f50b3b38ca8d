package control

// ValidJSON is validJSON, for the fuzz targets of control_test.
var ValidJSON = validJSON
