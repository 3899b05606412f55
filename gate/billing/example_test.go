package billing_test

import (
	"fmt"

	"github.com/trawlhq/trawl/gate/billing"
)

// The meter prices each usage line the cell reports.
func ExamplePrices_Price() {
	p := billing.DefaultPrices()
	fmt.Println(p.Price(billing.KindScrape, billing.LevelHTTP, billing.CacheMiss, 0, 0))
	fmt.Println(p.Price(billing.KindScrape, billing.LevelBrowser, billing.CacheArchive, 0, 0))
	fmt.Println(p.Price(billing.KindRecipe, "", billing.CacheHit, 0, 0))
	fmt.Println(p.Price(billing.KindExtract, billing.LevelLight, billing.CacheMiss, 6000, 800))
	// Output:
	// 1.000
	// 2.500
	// 0.000
	// 4.000
}
